#!/usr/bin/env python3
"""Writes the C++ block under README.md's "A taste" heading to a file, so that the
README's example is compiled and run as a test and cannot rot."""
import re
import sys

readme, output = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()
match = re.search(r"## A taste\n.*?```cpp\n(.*?)```", text, re.S)
if not match:
    sys.exit("README.md has no ```cpp block under '## A taste'")
with open(output, "w", encoding="utf-8") as out:
    out.write("// Extracted from README.md at build time.\n" + match.group(1))
