#!/usr/bin/env python3
"""Checks scripts/summarize.py, which scripts/test's last line comes from: every way a test can
fail counts as failed, never as passed or skipped. Each case writes a meson-logs/testlog.json
and reads the counts back.

Usage: summarize_test.py SUMMARIZE_PY
"""

import json
import os
import subprocess
import sys
import tempfile

CATCH_FAILED = "test cases: 1 | 0 passed | 1 failed\nassertions: 77 | 0 passed | 77 failed\n"

# (name, result, stdout) of one test, and the last line summarize.py must print.
CASES = [
    ("passed", "OK", "All tests passed (3 assertions in 2 test cases)\n", "2 passed, 0 failed"),
    ("catch summary", "FAIL", "test cases: 5 | 3 passed | 2 failed\n", "3 passed, 2 failed"),
    # Meson reads status 77 as skipped: a Catch2 summary with failures is still failures.
    ("77 failed assertions", "SKIP", CATCH_FAILED, "0 passed, 1 failed"),
    ("skipped, says why", "SKIP", "no CUDA device: skipped\n", "0 passed, 0 failed"),
    ("no test ran, failed", "FAIL", "No tests ran\n", "0 passed, 1 failed"),
    ("no test ran", "OK", "No tests ran\n", "0 passed, 0 failed"),
    ("leak after the summary", "FAIL", "All tests passed (1 assertion in 1 test case)\n==1==ERROR: LeakSanitizer\n",
     "1 passed, 1 failed"),
    ("killed, no output", "FAIL", "", "0 passed, 1 failed"),
    ("timed out", "TIMEOUT", "All tests passed (1 assertion in 1 test case)\n", "1 passed, 1 failed"),
    ("expected failure", "EXPECTEDFAIL", "", "1 passed, 0 failed"),
    ("passed unexpectedly", "UNEXPECTEDPASS", "", "0 passed, 1 failed"),
]


def main():
    summarize = sys.argv[1]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, result, stdout, expected in CASES:
            logs = os.path.join(tmp, "b", "meson-logs")
            os.makedirs(logs, exist_ok=True)
            with open(os.path.join(logs, "testlog.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps({"name": name, "result": result, "stdout": stdout}) + "\n")
            run = subprocess.run([sys.executable, summarize, os.path.join(tmp, "b")], capture_output=True,
                                 text=True, check=False)
            lines = run.stdout.strip().splitlines()
            last = lines[-1] if lines else ""
            want_rc = 0 if expected.endswith(" 0 failed") else 1  # status 1 when something failed
            ok = last == expected and run.returncode == want_rc
            print(f"{'ok' if ok else 'WRONG'}: {name}: {last!r} (status {run.returncode}); expected {expected!r}"
                  f" (status {want_rc})")
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
