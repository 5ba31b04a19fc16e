#!/usr/bin/env bash
# run.sh <harness> <corpus dir>: the test of suite 'fuzz' for one libFuzzer harness. Runs it for
# FLUIDK_FUZZ_SECONDS (20 by default) on a scratch copy of the corpus, so that the committed
# corpus never gains files; prints the executions ("stat::number_of_executed_units"). A crash
# fails the test and keeps its input under FLUIDK_FUZZ_ARTIFACTS (default: the scratch
# directory, kept when the run fails and removed when it passes).
set -euo pipefail
harness=$1 corpus=$2
seconds=${FLUIDK_FUZZ_SECONDS:-20}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fluidk-fuzz.XXXXXX")
mkdir -p "$scratch/corpus"
cp "$corpus"/* "$scratch/corpus/"
artifacts=${FLUIDK_FUZZ_ARTIFACTS:-$scratch}
mkdir -p "$artifacts"
rc=0
# libFuzzer's exit code for a crash is 77 by default, which Meson reads as "skipped".
"$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$artifacts/" "$scratch/corpus" 2>"$scratch/log" || rc=$?
grep -E '^stat::number_of_executed_units|^stat::new_units_added|^Done [0-9]+ runs' "$scratch/log" || true
if [[ $rc -ne 0 ]]; then
  tail -n 60 "$scratch/log"
  rm -rf "$scratch/corpus"
  echo "fuzz: $(basename "$harness") failed (exit $rc); its input is in $artifacts, its log in $scratch/log" >&2
  exit 1  # never 77, whatever the harness returned
fi
rm -rf "$scratch"
