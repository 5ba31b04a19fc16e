#!/usr/bin/env python3
"""Runs run-onnx where it must refuse: passes only when the command exits with STATUS and its
standard error holds TEXT. A crash (a signal), another status or another message fails.

Usage: expect_status.py [--truncate MODEL] STATUS TEXT COMMAND [ARG]...
With --truncate, the argument {truncated} becomes a file holding the first half of MODEL's
bytes (a model cut short).
"""

import os
import subprocess
import sys
import tempfile


def main():
    args = sys.argv[1:]
    truncated = None
    if len(args) >= 2 and args[0] == "--truncate":
        with open(args[1], "rb") as model:
            data = model.read()
        handle, truncated = tempfile.mkstemp(suffix=".onnx")
        with os.fdopen(handle, "wb") as out:
            out.write(data[: len(data) // 2])
        args = args[2:]
    if len(args) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    status, expected, command = int(args[0]), args[1], args[2:]
    if truncated is not None:
        command = [truncated if a == "{truncated}" else a for a in command]
    try:
        run = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
    finally:
        if truncated is not None:
            os.unlink(truncated)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != status:
        how = f"signal {-run.returncode}" if run.returncode < 0 else f"status {run.returncode}"
        print(f"expect_status.py: expected exit status {status}, got {how}", file=sys.stderr)
        return 1
    if expected not in run.stderr:
        print(f"expect_status.py: status {status}, but standard error lacks {expected!r}", file=sys.stderr)
        return 1
    print(f"expect_status.py: refused as expected ({expected!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
