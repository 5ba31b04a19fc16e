#!/usr/bin/env bash
# Shared helpers of the scripts in scripts/ (source it, don't run it): repository root,
# CUDA on PATH, logging, and idempotent Meson setup, build and test of a build directory.

if [[ -n ${FLUIDK_LIB_SOURCED:-} ]]; then return 0; fi
FLUIDK_LIB_SOURCED=1

# The repository root: the parent of the directory holding this file, with links resolved
# (Meson records real paths, which scripts compare with it).
FLUIDK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
export FLUIDK_ROOT

# CUDA is optional. Its default location is /usr/local/cuda (CUDA_HOME or CUDA_PATH win).
if ! command -v nvcc >/dev/null 2>&1; then
  for _cuda_dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [[ -n $_cuda_dir && -x $_cuda_dir/bin/nvcc ]]; then
      export PATH="$_cuda_dir/bin:$PATH"
      break
    fi
  done
  unset _cuda_dir
fi

# Logging: everything goes to stderr so that a script's stdout stays its result.
if [[ -t 2 ]]; then
  _log_bold=$'\e[1m' _log_red=$'\e[31m' _log_yellow=$'\e[33m' _log_reset=$'\e[0m'
else
  _log_bold='' _log_red='' _log_yellow='' _log_reset=''
fi
log() { printf '%s==> %s%s\n' "$_log_bold" "$*" "$_log_reset" >&2; }
info() { printf '    %s\n' "$*" >&2; }
warn() { printf '%swarning: %s%s\n' "$_log_yellow" "$*" "$_log_reset" >&2; }
error() { printf '%serror: %s%s\n' "$_log_red" "$*" "$_log_reset" >&2; }
die() {
  error "$*"
  exit 1
}

# Quiet by default: a stage's output goes to its log under build-logs/, and the screen gets one
# line per stage, with the end of the log and its path when the stage fails. --verbose
# (FLUIDK_VERBOSE=1) shows everything as it comes, and keeps the logs too.
FLUIDK_LOGS="$FLUIDK_ROOT/build-logs"
FLUIDK_VERBOSE=${FLUIDK_VERBOSE:-0}

# take_verbose_flag "$@": sets FLUIDK_VERBOSE when the arguments hold --verbose.
take_verbose_flag() {
  local arg
  for arg in "$@"; do
    [[ $arg == --verbose ]] && FLUIDK_VERBOSE=1
  done
  return 0
}

# stage <name> <command...>: runs one stage of a script, quietly or not; returns its status.
stage() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  local logfile="$FLUIDK_LOGS/${name//[^A-Za-z0-9_.-]/_}.log"
  mkdir -p "$FLUIDK_LOGS"
  if [[ $FLUIDK_VERBOSE == 1 ]]; then
    log "$name"
    # tee on a descriptor of its own, whose pid is kept: $! after the command would be the last
    # process substitution the command itself opened, if any.
    local tee_fd tee_pid
    exec {tee_fd}> >(tee "$logfile")
    tee_pid=$!
    "$@" >&"$tee_fd" 2>&1 || rc=$?
    exec {tee_fd}>&-
    wait "$tee_pid"  # for tee to write the last lines (only tee: scripts/test has builds in the background)
    info "$name: $((SECONDS - t0)) s"
    return $rc
  fi
  printf '%s==> %s%s ... ' "$_log_bold" "$name" "$_log_reset" >&2
  "$@" >"$logfile" 2>&1 || rc=$?
  if [[ $rc -eq 0 ]]; then
    printf 'ok (%d s)\n' $((SECONDS - t0)) >&2
  else
    printf '%sFAILED%s (%d s); the last lines of %s:\n' "$_log_red" "$_log_reset" $((SECONDS - t0)) "$logfile" >&2
    tail -n 25 "$logfile" | sed 's/^/    /' >&2
  fi
  return $rc
}

# configure_build <dir> [meson setup args...]
# Sets up a Meson build directory of the repository, idempotently. The arguments, the
# compiler variables from the environment and Meson's version are recorded in
# <dir>/.fluidk-setup: when they are unchanged, the directory is reconfigured in place
# (`meson setup --reconfigure`, which also picks up new headers and tests); when they
# changed, or an earlier setup did not finish, the directory is wiped and set up again.
# A relative <dir> is taken from the repository root.
configure_build() {
  local dir=$1
  shift
  [[ $dir == /* ]] || dir="$FLUIDK_ROOT/$dir"
  local stamp="$dir/.fluidk-setup" wanted
  wanted=$(
    printf 'meson %s\n' "$(meson --version)"
    printf 'CC=%s CXX=%s CFLAGS=%s CXXFLAGS=%s LDFLAGS=%s\n' \
      "${CC:-}" "${CXX:-}" "${CFLAGS:-}" "${CXXFLAGS:-}" "${LDFLAGS:-}"
    printf 'arg %s\n' "$@"
  )
  if [[ -f $stamp && -f $dir/meson-private/coredata.dat ]] && [[ $(cat "$stamp") == "$wanted" ]]; then
    log "meson setup --reconfigure $dir"
    # A failure here comes from the project (a broken meson.build): keep the directory.
    meson setup --reconfigure "$dir" "$FLUIDK_ROOT" "$@"
    return
  fi
  if [[ -e $dir ]]; then
    if [[ -d $dir/meson-private || -f $stamp || -z $(ls -A "$dir") ]]; then
      info "$(basename "$dir"): new options or an unfinished setup: wiping it"
      rm -rf "$dir"
    else
      error "$dir exists and is not a Meson build directory; not touching it"
      return 1
    fi
  fi
  log "meson setup $dir $*"
  meson setup "$dir" "$FLUIDK_ROOT" "$@" || return 1
  printf '%s\n' "$wanted" >"$stamp"
}

# configure_main_build: build/, the g++ release build shared by scripts/test and scripts/demo.
# oneDNN and OpenCL are required there: scripts/deps installs them, and a build that did not
# find them would leave their tests out.
configure_main_build() {
  CC=gcc CXX=g++ configure_build build --buildtype=release -Donednn=enabled -Dopencl=enabled
}

# build_and_test <dir> <failed-file>: builds what can be built (ninja -k 0), then runs `meson test` on the
# tests whose executables are up to date; tests that did not build are appended to
# <failed-file>, one "<dir name>: <test> (not built): FAILED" line each.
# Returns 0 when all built and passed, 1 when a test failed, 2 when the build failed.
build_and_test() {
  local dir=$1 failed_file=$2 name rc=0
  [[ $dir == /* ]] || dir="$FLUIDK_ROOT/$dir"
  name=$(basename "$dir")
  rm -f "$dir/meson-logs/testlog.json"
  log "build $name"
  if ninja -C "$dir" -k 0; then
    log "test $name"
    meson test -C "$dir" --no-rebuild --print-errorlogs || rc=1
    return $rc
  fi
  rc=2
  error "$name: the build failed; running the tests that did build"
  # Tests whose executable or dependencies ninja still wants to rebuild did not build.
  local -a runnable=()
  local line tname
  while IFS=$'\t' read -r line tname; do
    if [[ $line == run ]]; then
      runnable+=("$tname")
    else
      error "$name: test $tname did not build (or its sources changed during the build)"
      echo "$name: $tname (not built): FAILED" >>"$failed_file"
    fi
  done < <(python3 - "$dir" <<'EOF'
import json, os, subprocess, sys
d = sys.argv[1]
intro = lambda what: json.loads(subprocess.run(['meson', 'introspect', d, what], check=True,
                                               capture_output=True, text=True).stdout)
targets = {t['id']: t['filename'] for t in intro('--targets')}
seen = set()
for t in intro('--tests'):
    if t['name'] in seen:
        continue
    seen.add(t['name'])
    outputs = [t['cmd'][0]] if t['cmd'] and t['cmd'][0].startswith(os.path.abspath(d) + os.sep) else []
    for dep in t.get('depends', []):
        outputs += targets.get(dep, [])
    ok = True
    for out in outputs:
        rel = os.path.relpath(out, d)
        r = subprocess.run(['ninja', '-C', d, '-n', rel], capture_output=True, text=True)
        if r.returncode != 0 or 'no work to do' not in r.stdout:
            ok = False
            break
    print(('run' if ok else 'broken') + '\t' + t['name'])
EOF
  )
  if [[ ${#runnable[@]} -gt 0 ]]; then
    log "test $name (${#runnable[@]} tests that built)"
    meson test -C "$dir" --no-rebuild --print-errorlogs "${runnable[@]}" || true
  fi
  return $rc
}

# The debug information of the sanitizer builds (clang++-14): line tables, which is what their
# reports print (file, line and inlined frames). Appended to cpp_args, after the build type's
# -g, which it replaces: full -g made clang++-14 with ASan and UBSan take 106 s of CPU for
# test/ops_test.cpp, against 90 s with line tables only; with ThreadSanitizer, the CPU kernels'
# file took 37 s against 34 s.
sanitizer_debug_info=-gline-tables-only

# configure_fuzz_build: build-fuzz/, the libFuzzer harnesses of test/fuzz (clang++-14 with
# ASan and UBSan) with the kernels' coverage, for scripts/fuzz (scripts/test runs the harnesses
# in build-asan/); fuzz_targets names them.
fuzz_targets=(test/fuzz/fuzz_program_text test/fuzz/fuzz_keys test/fuzz/fuzz_planner test/fuzz/fuzz_onnx_model)
configure_fuzz_build() {
  CC=clang-14 CXX=clang++-14 configure_build build-fuzz --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true -Dtests=false -Dexamples=false \
    -Dcuda=disabled -Donednn=disabled -Dopencl=disabled \
    "-Dcpp_args=-fno-sanitize-recover=all $sanitizer_debug_info"
}
