#!/usr/bin/env python3
"""Writes C++ blocks of the documentation to files, so that they are compiled (and run) as
tests and cannot rot.

  extract.py README.md OUT            the block under README.md's "A taste" heading
  extract.py --all DOC.md OUT1 OUT2 ...  every ```cpp block of DOC.md, one file each; their
                                         number must be the number of outputs
"""
import re
import sys

args = sys.argv[1:]
if args and args[0] == "--all":
    doc, outputs = args[1], args[2:]
    blocks = re.findall(r"```cpp\n(.*?)```", open(doc, encoding="utf-8").read(), re.S)
    if len(blocks) != len(outputs):
        sys.exit(f"{doc} has {len(blocks)} ```cpp blocks; the build expects {len(outputs)}: "
                 "update the test's list of outputs")
    for i, (block, output) in enumerate(zip(blocks, outputs), 1):
        with open(output, "w", encoding="utf-8") as out:
            out.write(f"// Extracted from {doc.split('/')[-1]}, C++ block {i}, at build time.\n" + block)
    sys.exit(0)

readme, output = args[0], args[1]
text = open(readme, encoding="utf-8").read()
match = re.search(r"## A taste\n.*?```cpp\n(.*?)```", text, re.S)
if not match:
    sys.exit("README.md has no ```cpp block under '## A taste'")
with open(output, "w", encoding="utf-8") as out:
    out.write("// Extracted from README.md at build time.\n" + match.group(1))
