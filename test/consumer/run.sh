#!/usr/bin/env bash
# Consumer tests: installs fluidk into a temporary prefix, then builds test/consumer/main.cpp
# with pkg-config, with CMake's find_package and as a Meson subproject.
# Usage: run.sh <source-dir> <work-dir> [results-file]
#   <work-dir> holds the temporary build, prefix and consumer builds (recreated each run);
#   one line per check, "consumer: <name>: ok|FAILED", goes to stdout and to [results-file].
set -uo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 <source-dir> <work-dir> [results-file]" >&2
  exit 2
fi
src=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" || exit 2
work=$(cd "$2" && pwd) || exit 2
results=${3:-}
here="$src/test/consumer"
prefix="$work/prefix"
failures=0

[[ -n $results ]] && : >"$results"

# Only the paths this script creates are removed, whatever <work-dir> is.
rm -rf "$work/fluidk-build" "$prefix" "$work/logs" "$work/pkg-config" "$work/cmake" \
  "$work/cmake_too_new" "$work/meson-src" "$work/meson-build"
mkdir -p "$work/logs"

# report <name> <status 0|1>: prints the check's line; on failure, the end of its log.
report() {
  local name=$1 rc=$2 line
  if [[ $rc -eq 0 ]]; then
    line="consumer: $name: ok"
  else
    line="consumer: $name: FAILED"
    failures=$((failures + 1))
    if [[ -s $work/logs/$name.log ]]; then
      echo "---- $work/logs/$name.log (last lines) ----" >&2
      tail -n 30 "$work/logs/$name.log" >&2
      echo "----" >&2
    fi
  fi
  echo "$line"
  [[ -n $results ]] && echo "$line" >>"$results"
  return 0
}

# expect_output <exe>: runs the consumer and checks it prints the project's version.
expect_output() {
  local out
  out=$("$1") || { echo "$1 exited with $?"; return 1; }
  echo "output: $out"
  if [[ $out != "fluidk $version" ]]; then
    echo "expected: fluidk $version"
    return 1
  fi
}

# 1. Install: an install-only build of fluidk (no tests, examples or backends).
check_install() {
  meson setup "$work/fluidk-build" "$src" --prefix="$prefix" \
    -Dtests=false -Dexamples=false -Dcuda=disabled -Dopencl=disabled -Donednn=disabled || return 1
  meson install -C "$work/fluidk-build" || return 1
  version=$(meson introspect "$work/fluidk-build" --projectinfo |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])') || return 1
  local f ok=0
  for f in include/fluidk/fluidk.hpp include/fluidk/version.hpp share/pkgconfig/fluidk.pc \
    share/cmake/fluidk/fluidkConfig.cmake share/cmake/fluidk/fluidkConfigVersion.cmake; do
    if [[ -f $prefix/$f ]]; then echo "installed: $f"; else echo "missing: $prefix/$f"; ok=1; fi
  done
  return "$ok"
}

# 2. pkg-config + g++.
check_pkg_config() {
  local cflags
  cflags=$(PKG_CONFIG_PATH="$prefix/share/pkgconfig" pkg-config --cflags fluidk) || return 1
  echo "cflags: $cflags"
  [[ " $cflags " == *" -I$prefix/include "* ]] || { echo "no -I$prefix/include in the cflags"; return 1; }
  [[ " $cflags " == *" -std=c++20 "* ]] || { echo "no -std=c++20 in the cflags"; return 1; }
  mkdir -p "$work/pkg-config"
  # shellcheck disable=SC2086  # the cflags are a list of words
  g++ $cflags -Wall -Wextra -Wpedantic -Werror "$here/main.cpp" -o "$work/pkg-config/consumer" || return 1
  expect_output "$work/pkg-config/consumer"
}

# 3. CMake: find_package(fluidk 0.1 REQUIRED) and the imported target fluidk::fluidk.
check_cmake() {
  cmake -S "$here/cmake" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release || return 1
  local found
  found=$(sed -n 's/^fluidk_DIR:[A-Z]*=//p' "$work/cmake/CMakeCache.txt")
  echo "fluidk_DIR: $found"
  [[ $found == "$prefix/share/cmake/fluidk" ]] || { echo "fluidk was not found in $prefix"; return 1; }
  cmake --build "$work/cmake" --verbose || return 1
  expect_output "$work/cmake/consumer"
}

# 4. CMake: requests the installed version does not satisfy must fail to configure.
check_cmake_too_new() {
  local request out ok=0
  for request in 9.0 1.0 0.2; do
    echo "== find_package(fluidk $request REQUIRED)"
    if out=$(cmake -S "$here/cmake_too_new" -B "$work/cmake_too_new/$request" \
      -DCMAKE_PREFIX_PATH="$prefix" -DFLUIDK_REQUEST="$request" 2>&1); then
      echo "$out"
      echo "configured, but fluidk $version must not satisfy $request"
      ok=1
    else
      echo "$out"
      # CMake wraps its message: compare with the whitespace squeezed.
      if [[ $(tr -s ' \n' ' ' <<<"$out") != *"compatible with requested version \"$request\""* ]]; then
        echo "failed for another reason than the version"
        ok=1
      fi
    fi
  done
  return "$ok"
}

# 5. Meson: dependency('fluidk') with the fallback to subprojects/fluidk (the source tree).
check_meson() {
  local msrc="$work/meson-src"
  mkdir -p "$msrc/meson/subprojects" || return 1
  cp "$here/main.cpp" "$msrc/" && cp "$here/meson/meson.build" "$msrc/meson/" || return 1
  ln -s "$src" "$msrc/meson/subprojects/fluidk" || return 1
  env -u PKG_CONFIG_PATH meson setup "$work/meson-build" "$msrc/meson" \
    --force-fallback-for=fluidk --wrap-mode=nodownload || return 1
  meson compile -C "$work/meson-build" || return 1
  expect_output "$work/meson-build/consumer"
}

logfile() { echo "$work/logs/$1.log"; }

version=""
check_install >"$(logfile install)" 2>&1
installed=$?
report install $installed
if [[ $installed -eq 0 ]]; then
  check_pkg_config >"$(logfile pkg-config)" 2>&1
  report pkg-config $?
  check_cmake >"$(logfile cmake)" 2>&1
  report cmake $?
  check_cmake_too_new >"$(logfile cmake-too-new)" 2>&1
  report cmake-too-new $?
else
  # Without an installed package only the subproject check can run.
  for name in pkg-config cmake cmake-too-new; do
    echo "fluidk did not install; see $(logfile install)" >"$(logfile $name)"
    report "$name" 1
  done
fi
[[ -n $version ]] || version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
check_meson >"$(logfile meson)" 2>&1
report meson $?

exit $((failures > 0))
