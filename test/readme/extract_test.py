#!/usr/bin/env python3
"""Checks extract.py's reading of a page: each C++ block is a test, a block in a form that it
would pass over stops it (rather than leaving the block untested), and a block with a main in
any form is run. Each case is a small page written to a scratch directory.

Usage: extract_test.py EXTRACT_PY
"""

import os
import subprocess
import sys
import tempfile

REFUSED = "a block opened with"
UNCLOSED = "2 ```cpp lines open blocks, but 1 blocks"
# (name, page, what --list must print, or the text of the error that must stop it[, text that
# the program written from the block must hold]).
CASES = [
    ("plain block", "```cpp\nint x;\n```\n", "1 compile -"),
    ("int main", "```cpp\nint main() { return 0; }\n```\n", "1 run -"),
    ("auto main", "```cpp\nauto main() -> int { return 1; }\n```\n", "1 run -"),
    ("needs a backend", "<!-- doc-test: needs opencl -->\n```cpp\nint x;\n```\n", "1 compile opencl"),
    ("indented", "  ```cpp\nint x;\n```\n", REFUSED),
    ("in a quote", "> ```cpp\n> int x;\n> ```\n", REFUSED),
    ("in a list item", "1. ```cpp\n   int x;\n   ```\n", REFUSED),
    ("bulleted", "- ```cpp\n  int x;\n  ```\n", REFUSED),
    ("other name", "```c++\nint x;\n```\n", REFUSED),
    ("other case", "```CPP\nint x;\n```\n", REFUSED),
    ("info string", "```cpp title=x\nint x;\n```\n", REFUSED),
    ("four backticks", "````cpp\nint x;\n````\n", REFUSED),
    ("tildes", "~~~cpp\nint x;\n~~~\n", REFUSED),
    ("braces", "```{.cpp}\nint x;\n```\n", REFUSED),
    ("not closed", "```cpp\nint x;\n```\n```cpp\nint y;\n", UNCLOSED),
    # A fence with an info string does not close a block (Markdown shows it inside): the block
    # runs to the bare fence, and fails to compile.
    ("fence with an info string inside", "```cpp\nint x;\n```bash\nls\n```\n", "1 compile -", "```bash\nls\n"),
]


def main():
    extract = sys.argv[1]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, page, expected, *body in CASES:
            path = os.path.join(tmp, "page.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write("# A page\n\n" + page)
            run = subprocess.run([sys.executable, extract, "--list", path], capture_output=True, text=True,
                                 check=False)
            if expected in (REFUSED, UNCLOSED):
                ok = run.returncode == 1 and expected in run.stderr and not run.stdout
                got = run.stderr.strip()
            else:
                ok = run.returncode == 0 and run.stdout.strip() == expected
                got = run.stdout.strip() or run.stderr.strip()
                if body:  # what the written program must hold
                    program = os.path.join(tmp, "block.cpp")
                    subprocess.run([sys.executable, extract, "--write", path, program], check=True)
                    with open(program, encoding="utf-8") as f:
                        ok = ok and body[0] in f.read()
            print(f"{'ok' if ok else 'WRONG'}: {name}: {got!r}; expected {expected!r}")
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
