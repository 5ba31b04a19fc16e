#!/usr/bin/env bash
# Consumer tests: installs fluidk into a temporary prefix, then builds test/consumer/main.cpp
# four ways (Meson through pkg-config, CMake's find_package, a Meson subproject, a plain
# compiler command from pkg-config), each with every backend module that way finds, and runs
# it: one line per way and one per (way, backend) that the installed package offers.
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
rm -rf "$work/fluidk-build" "$prefix" "$work/logs" "$work/plain" "$work/cmake" \
  "$work/cmake_too_new" "$work/meson-src" "$work/meson-build" "$work/meson-pc-src" "$work/meson-pc-build"
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

# The backend modules the install offers (its pkg-config files): every way should find these.
installed_backends() {
  local b
  for b in onednn opencl cuda; do
    [[ -f $prefix/share/pkgconfig/fluidk-$b.pc ]] && echo "$b"
  done
  return 0
}

# expect_output <way> <exe>: runs the consumer, checks it prints the project's version, and
# writes "<backend>" to $work/logs/<way>.backends for each backend line that says ok.
expect_output() {
  local way=$1 exe=$2 out
  out=$("$exe") || { echo "$exe exited with $?"; return 1; }
  echo "output:"
  echo "$out"
  sed -n 's/^backend \([a-z]*\): ok.*/\1/p' <<<"$out" >"$work/logs/$way.backends"
  if [[ $(head -n 1 <<<"$out") != "fluidk $version" ]]; then
    echo "expected first: fluidk $version"
    return 1
  fi
}

# 1. Install: an install-only build of fluidk (no tests or examples: nothing is compiled),
# with the backends this machine has, so that their pkg-config modules are installed.
check_install() {
  meson setup "$work/fluidk-build" "$src" --prefix="$prefix" -Dtests=false -Dexamples=false || return 1
  local built
  built=$(ninja -C "$work/fluidk-build" -t targets all | grep -c -E '\.(o|a|so|exe)(:| )' || true)
  echo "compiled targets: $built"
  [[ $built -eq 0 ]] || { echo "an install with tests and examples off compiled something"; return 1; }
  meson install -C "$work/fluidk-build" || return 1
  version=$(meson introspect "$work/fluidk-build" --projectinfo |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])') || return 1
  local f ok=0
  for f in include/fluidk/fluidk.hpp include/fluidk/version.hpp share/pkgconfig/fluidk.pc \
    share/cmake/fluidk/fluidkConfig.cmake share/cmake/fluidk/fluidkConfigVersion.cmake; do
    if [[ -f $prefix/$f ]]; then echo "installed: $f"; else echo "missing: $prefix/$f"; ok=1; fi
  done
  echo "backend modules: $(installed_backends | tr '\n' ' ')"
  return "$ok"
}

# 2. A plain compiler command: g++ with `pkg-config --cflags --libs` of fluidk and of each
# backend module pkg-config finds.
check_plain_compiler() {
  local modules=(fluidk) b flags
  for b in onednn opencl cuda; do
    PKG_CONFIG_PATH="$prefix/share/pkgconfig" pkg-config --exists "fluidk-$b" && modules+=("fluidk-$b")
  done
  flags=$(PKG_CONFIG_PATH="$prefix/share/pkgconfig" pkg-config --cflags --libs "${modules[@]}") || return 1
  echo "flags: $flags"
  [[ " $flags " == *" -I$prefix/include "* ]] || { echo "no -I$prefix/include in the flags"; return 1; }
  [[ " $flags " == *" -std=c++20 "* ]] || { echo "no -std=c++20 in the flags"; return 1; }
  mkdir -p "$work/plain"
  # shellcheck disable=SC2086  # the flags are a list of words
  g++ -Wall -Wextra -Wpedantic -Werror "$here/main.cpp" $flags -o "$work/plain/consumer" || return 1
  expect_output plain-compiler "$work/plain/consumer"
}

# 3. Meson through pkg-config: dependency('fluidk') and dependency('fluidk-<backend>').
check_meson_pkg_config() {
  local msrc="$work/meson-pc-src"
  mkdir -p "$msrc/meson_pkg_config" || return 1
  cp "$here/main.cpp" "$msrc/" && cp "$here/meson_pkg_config/meson.build" "$msrc/meson_pkg_config/" || return 1
  PKG_CONFIG_PATH="$prefix/share/pkgconfig" meson setup "$work/meson-pc-build" "$msrc/meson_pkg_config" || return 1
  meson compile -C "$work/meson-pc-build" || return 1
  expect_output meson-pkg-config "$work/meson-pc-build/consumer"
}

# 4. CMake: find_package(fluidk 0.1 REQUIRED OPTIONAL_COMPONENTS ...) and the imported targets.
check_cmake() {
  cmake -S "$here/cmake" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release || return 1
  local found
  found=$(sed -n 's/^fluidk_DIR:[A-Z]*=//p' "$work/cmake/CMakeCache.txt")
  echo "fluidk_DIR: $found"
  [[ $found == "$prefix/share/cmake/fluidk" ]] || { echo "fluidk was not found in $prefix"; return 1; }
  cmake --build "$work/cmake" --verbose || return 1
  expect_output cmake "$work/cmake/consumer"
}

# 5. CMake: requests the installed version does not satisfy must fail to configure.
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

# 6. Meson: fluidk as a subproject (subprojects/fluidk, the source tree), with the backend
# dependencies it found.
check_meson_subproject() {
  local msrc="$work/meson-src"
  mkdir -p "$msrc/meson/subprojects" || return 1
  cp "$here/main.cpp" "$msrc/" && cp "$here/meson/meson.build" "$msrc/meson/" || return 1
  ln -s "$src" "$msrc/meson/subprojects/fluidk" || return 1
  env -u PKG_CONFIG_PATH meson setup "$work/meson-build" "$msrc/meson" --wrap-mode=nodownload || return 1
  meson compile -C "$work/meson-build" || return 1
  expect_output meson-subproject "$work/meson-build/consumer"
}

logfile() { echo "$work/logs/$1.log"; }

# report_backends <way> <status>: a line per backend the install offers, ok when the way's
# consumer was built with it and its check passed.
report_backends() {
  local way=$1 rc=$2 b
  for b in $(installed_backends); do
    if [[ $rc -eq 0 ]] && grep -qx "$b" "$work/logs/$way.backends" 2>/dev/null; then
      report "$way + $b" 0
    else
      echo "$way: the consumer was not built with backend $b, or its check failed" >>"$(logfile "$way")"
      cp "$(logfile "$way")" "$(logfile "$way + $b")"
      report "$way + $b" 1
    fi
  done
}

version=""
check_install >"$(logfile install)" 2>&1
installed=$?
report install $installed
[[ -n $version ]] || version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)
if [[ $installed -eq 0 ]]; then
  for way in meson-pkg-config cmake plain-compiler; do
    case $way in
      meson-pkg-config) check_meson_pkg_config >"$(logfile $way)" 2>&1 ;;
      cmake) check_cmake >"$(logfile $way)" 2>&1 ;;
      plain-compiler) check_plain_compiler >"$(logfile $way)" 2>&1 ;;
    esac
    rc=$?
    report $way $rc
    report_backends $way $rc
  done
  check_cmake_too_new >"$(logfile cmake-too-new)" 2>&1
  report cmake-too-new $?
else
  # Without an installed package only the subproject check can run.
  for name in meson-pkg-config cmake plain-compiler cmake-too-new; do
    echo "fluidk did not install; see $(logfile install)" >"$(logfile $name)"
    report "$name" 1
  done
fi
check_meson_subproject >"$(logfile meson-subproject)" 2>&1
rc=$?
report meson-subproject $rc
[[ $installed -eq 0 ]] && report_backends meson-subproject $rc

exit $((failures > 0))
