#!/usr/bin/env python3
"""Runs a command that must refuse its input: passes only when it exits with status 1 and
its standard error holds the expected text. A crash (a signal, an abort), another status or
another message fails, where Meson's should_fail would count any failure, a crash included,
as the expected one.

Usage: expect_failure.py EXPECTED_TEXT COMMAND [ARG]...
"""

import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    expected, command = sys.argv[1], sys.argv[2:]
    run = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 1:
        how = f"signal {-run.returncode}" if run.returncode < 0 else f"status {run.returncode}"
        print(f"expect_failure.py: expected exit status 1, got {how}", file=sys.stderr)
        return 1
    if expected not in run.stderr:
        print(f"expect_failure.py: status 1, but standard error lacks {expected!r}", file=sys.stderr)
        return 1
    print(f"expect_failure.py: refused as expected ({expected!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
