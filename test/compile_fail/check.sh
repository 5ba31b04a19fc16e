#!/usr/bin/env bash
# Negative compile test: the source must fail to compile, its first error line must carry
# the message after "// expect: " in the source, and there must be no further error.
set -u
src=$1; shift
expected=$(sed -n 's|^// expect: ||p' "$src" | head -n 1)
if [ -z "$expected" ]; then echo "$src has no '// expect: ' line"; exit 1; fi
out=$("$@" -fsyntax-only "$src" 2>&1)
status=$?
if [ $status -eq 0 ]; then echo "FAIL: $src compiled, but must not"; exit 1; fi
errors=$(printf '%s\n' "$out" | grep -E '(error|fatal error):' )
first=$(printf '%s\n' "$errors" | head -n 1)
count=$(printf '%s\n' "$errors" | grep -c .)
if ! printf '%s\n' "$first" | grep -qF -- "$expected"; then
  printf 'FAIL: first error does not carry the expected message\n  expected: %s\n  got:      %s\n' "$expected" "$first"
  printf '%s\n' "$out" | head -n 30
  exit 1
fi
if [ "$count" -ne 1 ]; then
  printf 'FAIL: %s errors, expected exactly one (no cascade):\n%s\n' "$count" "$errors"
  exit 1
fi
printf 'ok: %s\n  %s\n' "$(basename "$src")" "$first"
