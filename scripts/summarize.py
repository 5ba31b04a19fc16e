#!/usr/bin/env python3
"""Counts the test cases of one or more Meson build directories and of extra checks.

Usage: summarize.py [--checks FILE]... BUILD_DIR...

For each build directory, reads meson-logs/testlog.json (one JSON object per line):
  * a Catch2 test counts the test cases from its summary line ("All tests passed (N
    assertions in M test cases)" or "test cases: T | P passed | F failed | X failed as
    expected"); a failing result with no failed case in the summary (a crash or a leak
    report after the summary) adds one failed case;
  * a test with result SKIP counts as one skipped case, unless its output holds a Catch2
    summary with failed cases: those count as failed;
  * a failing test whose output says "No tests ran" counts as one failed case;
  * any other test counts as one case, passed or failed by its result.
Each --checks FILE holds lines "<name>: ok|FAILED|skipped", one case each (consumer
checks, tests that did not build, steps that failed).

Prints the failed cases, then as last line "N passed, M failed[, K skipped]".
Exits 1 when something failed or no test case was found at all.
"""

import argparse
import json
import os
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
SUMMARY = re.compile(r"^test cases: *(?:(\d+)|- none -)((?: *\| *\d+ [a-z ]+?)*)[ \t]*$", re.M)
COLUMN = re.compile(r" *\| *(\d+) ([a-z ]+?)(?= *\||$)")
NO_TESTS = re.compile(r"^No tests ran\s*$", re.M)

PASSING = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}


def catch2_counts(stdout):
    """(passed, failed, skipped) from a Catch2 2.x console summary, or None."""
    text = ANSI.sub("", stdout or "")
    last = None
    for m in ALL_PASSED.finditer(text):
        last = (m.end(), (int(m.group(2)), 0, 0))
    for m in SUMMARY.finditer(text):
        cols = {name.strip(): int(n) for n, name in COLUMN.findall(m.group(2))}
        total = int(m.group(1) or 0)
        failed = cols.get("failed", 0)
        skipped = cols.get("skipped", 0)
        passed = cols.get("passed", 0) + cols.get("failed as expected", 0)
        # Whatever the columns do not cover (none in Catch2 2.x) counts as failed.
        failed += max(0, total - passed - failed - skipped)
        if last is None or m.end() > last[0]:
            last = (m.end(), (passed, failed, skipped))
    for m in NO_TESTS.finditer(text):
        if last is None or m.end() > last[0]:
            last = (m.end(), (0, 0, 1))
    return None if last is None else last[1]


def read_testlog(build_dir):
    path = os.path.join(build_dir, "meson-logs", "testlog.json")
    if not os.path.exists(path):
        return None
    entries = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if line:
                entries.append(json.loads(line))
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checks", action="append", default=[], help="file of '<name>: ok|FAILED|skipped' lines")
    ap.add_argument("build_dirs", nargs="*")
    args = ap.parse_args()

    passed = failed = skipped = 0
    failures = []

    for d in args.build_dirs:
        label = os.path.basename(os.path.normpath(d))
        try:
            entries = read_testlog(d)
        except (OSError, ValueError) as err:
            print(f"{label}: unreadable meson-logs/testlog.json: {err}")
            failures.append(f"{label}: unreadable test log")
            failed += 1
            continue
        if entries is None:
            print(f"{label}: no meson-logs/testlog.json: no tests ran")
            failures.append(f"{label}: no test results")
            failed += 1
            continue
        p0, f0, s0 = passed, failed, skipped
        for e in entries:
            name, result = e.get("name", "?"), e.get("result", "?")
            counts = catch2_counts(e.get("stdout"))
            if result in SKIPPED and counts is not None and counts[1] == 0:
                counts = None  # skipped as it says, its summary (if any) without a failure
            if counts is not None:
                p, f, s = counts
                if result not in PASSING and f == 0:
                    # Crashed or failed after printing its summary (e.g. a leak report), or ran
                    # no test case and failed: not skipped.
                    f, s = 1, 0
                passed, failed, skipped = passed + p, failed + f, skipped + s
                if f:
                    failures.append(f"{label}: {name}: {result}, {f} failed test case(s)")
            elif result in SKIPPED:
                skipped += 1
            elif result in PASSING:
                passed += 1
            else:
                failed += 1
                failures.append(f"{label}: {name}: {result}")
        print(f"{label}: {passed - p0} passed, {failed - f0} failed, {skipped - s0} skipped")

    for path in args.checks:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or ": " not in line:
                    continue
                name, status = line.rsplit(": ", 1)
                if status == "ok":
                    passed += 1
                elif status == "skipped":
                    skipped += 1
                else:
                    failed += 1
                    failures.append(f"{name}: {status}")

    for f in failures:
        print(f"FAILED {f}")
    if skipped:
        print(f"{skipped} skipped (each says why in its log)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed + skipped == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
