#!/usr/bin/env bash
# run.sh <harness> <corpus dir>: runs a libFuzzer harness for FLUIDK_FUZZ_SECONDS (20 by
# default) on a scratch copy of the corpus. A crash leaves its input under
# FLUIDK_FUZZ_ARTIFACTS (the scratch directory by default) and fails; the last lines give
# the executions ("stat::number_of_executed_units").
set -euo pipefail
harness=$1 corpus=$2
seconds=${FLUIDK_FUZZ_SECONDS:-20}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fluidk-fuzz.XXXXXX")
trap 'rm -rf "$scratch/corpus"' EXIT
mkdir -p "$scratch/corpus"
cp "$corpus"/* "$scratch/corpus/" 2>/dev/null || true
artifacts=${FLUIDK_FUZZ_ARTIFACTS:-$scratch}
mkdir -p "$artifacts"
rc=0
"$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$scratch/corpus" 2>"$scratch/log" || rc=$?
grep -E '^stat::number_of_executed_units|^stat::new_units_added|^Done [0-9]+ runs' "$scratch/log" || true
if [[ $rc -ne 0 ]]; then
  tail -n 60 "$scratch/log"
  echo "fuzz: $(basename "$harness") failed (exit $rc); the input is in $artifacts" >&2
fi
exit $rc
