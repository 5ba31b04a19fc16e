#!/usr/bin/env python3
"""Turns the C++ blocks of the documentation into tests, so that no example can rot.

Every ```cpp block of README.md and docs/*.md is a whole translation unit, compiled as it
is written with the project's warnings (errors): a block with a main is linked and run, its
exit status the test's result; a block without one is compiled (a reader copies it into a
file of theirs, so it must compile there too). A block says what it needs through an HTML
comment on the line right before its opening fence, invisible when the page is rendered:

  <!-- doc-test: needs opencl -->     compiled with that backend's dependency (onednn,
                                       opencl, cuda; several may be listed), and left out of
                                       builds without it. A CUDA block is host code: the
                                       host compiler builds it against the CUDA headers.
  <!-- doc-test: continue -->         continues the program of the C++ block before it (a
                                       page that builds one program step by step)
  <!-- doc-test: excerpt PATH -->     quotes PATH (from the repository root), which the
                                       header tests compile: not compiled on its own, checked
                                       instead. Comments and spacing aside, its lines are
                                       consecutive lines of PATH, except that a line holding
                                       only a comment with "..." stands for lines left out.

Modes (meson.build runs the first two; the tests run the others):
  extract.py --list PAGE              one line per test: "<block> run|compile <backend,...|->",
                                      or "<block> excerpt <path>"
  extract.py --write PAGE OUT...      writes the programs of PAGE, one file each, in the
                                      order of --list
  extract.py --check-excerpt PAGE N   checks that block N of PAGE quotes its file
  extract.py --check-pages ROOT PAGE...  checks that PAGE... are README.md and docs/*.md
"""
import glob
import os
import re
import sys

# A block ends at a bare ``` line: a fence with an info string opens another block, which
# Markdown shows inside this one.
FENCE = re.compile(r"(?:^<!-- doc-test: (?P<marker>[^>]*?) -->\n)?^```cpp\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
# Fences of C++ written any other way than a plain ```cpp line at the margin (other names,
# another case, an info string after the name, an indent, inside a quote or a list item, more
# backticks, ~~~, {.cpp}), which FENCE would leave out: refused, so that none is.
CPP_FENCE = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:(?:[-*+]|\d+[.)])[ \t]+)?(?:`{3,}|~{3,})[ \t]*\{?[ \t]*\.?"
                       r"(?:c\+\+|cpp|cxx|cc|hpp|cu|cuda|h)(?!\w).*$", re.M | re.I)
# A main in any form (int main(, auto main() -> int): such a block is linked and run; a block
# that only names main( somewhere fails to link, which is loud.
MAIN = re.compile(r"\bmain\s*\(")
BACKENDS = {"onednn", "opencl", "cuda"}


def fail(message):
    sys.exit(f"extract.py: {message}")


def blocks(page):
    """Yields (number, marker words, body) for each ```cpp block of the page, from 1."""
    text = open(page, encoding="utf-8").read()
    for fence in CPP_FENCE.finditer(text):
        if fence.group(0) != "```cpp":
            fail(f"{page}: a block opened with {fence.group(0)!r}: write C++ as a plain ```cpp line "
                 "at the margin, so that the tests compile it")
    found = list(FENCE.finditer(text))
    opened = len(CPP_FENCE.findall(text))
    if opened != len(found):
        fail(f"{page}: {opened} ```cpp lines open blocks, but {len(found)} blocks are closed by a ``` line")
    for number, match in enumerate(found, 1):
        yield number, (match.group("marker") or "").split(), match.group("body")


def items(page):
    """The tests of a page: [(block, kind, detail, source)], kind run, compile or excerpt."""
    out = []
    name = os.path.basename(page)
    for number, marker, body in blocks(page):
        header = f"// {name}, C++ block {number}\n"
        word, args = (marker[0], marker[1:]) if marker else ("", [])
        if word == "excerpt":
            if len(args) != 1:
                fail(f"{page}: block {number}: 'excerpt' takes one path")
            out.append([number, "excerpt", args[0], body])
        elif word == "continue":
            programs = [item for item in out if item[1] != "excerpt"]
            if args or not programs:
                fail(f"{page}: block {number}: 'continue' needs a C++ block to continue, and no argument")
            programs[-1][3] += header + body
        elif word in ("", "needs"):
            unknown = set(args) - BACKENDS
            if unknown or (word == "needs" and not args):
                fail(f"{page}: block {number}: 'needs' takes backends among {sorted(BACKENDS)}")
            out.append([number, "", ",".join(args) or "-", header + body])
        else:
            fail(f"{page}: block {number}: unknown doc-test marker '{' '.join(marker)}'")
    for item in out:
        if item[1] == "":
            item[1] = "run" if MAIN.search(item[3]) else "compile"
    return out


def code_lines(text):
    """[(code, elision, line)] of C++ text: each line's code with comments and spacing taken
    out; a line that held only a comment with "..." is an elision; other empty lines are
    dropped."""
    text = re.sub(r"/\*(.*?)\*/", lambda m: "//" + m.group(1).replace("\n", " "), text, flags=re.S)
    out = []
    for line in text.splitlines():
        code, _, comment = line.partition("//")
        if squeezed := re.sub(r"\s+", "", code):
            out.append((squeezed, False, line.strip()))
        elif "..." in comment:
            out.append(("", True, line.strip()))
    return out


def quotes(quoted, source, at=0):
    """Whether the quoted lines match source lines from index `at` on (see --help)."""
    if not quoted:
        return True
    code, elision, _ = quoted[0]
    if elision:
        return any(quotes(quoted[1:], source, start) for start in range(at, len(source) + 1))
    return at < len(source) and source[at][0] == code and quotes(quoted[1:], source, at + 1)


def check_excerpt(page, number):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    found = [item for item in items(page) if item[0] == number and item[1] == "excerpt"]
    if not found:
        fail(f"{page}: block {number} is not an excerpt")
    _, _, path, body = found[0]
    quoted = code_lines(body)
    source = [line for line in code_lines(open(os.path.join(root, path), encoding="utf-8").read()) if line[0]]
    starts = [i for i, line in enumerate(source) if quoted and line[0] == quoted[0][0]]
    if not any(quotes(quoted, source, start) for start in starts):
        # Say how far the quote matches, to point at the line that no longer does.
        best = 0
        for start in starts:
            for length in range(len(quoted), best, -1):
                if quotes(quoted[:length], source, start):
                    best = length
                    break
        wrong = quoted[min(best, len(quoted) - 1)][2]
        fail(f"{os.path.basename(page)}: block {number} quotes {path}, but its lines are not lines of it: "
             f"the quote stops matching at '{wrong}' (mark lines left out with a '// ...' line)")


def main(args):
    if len(args) == 2 and args[0] == "--list":
        for number, kind, detail, _ in items(args[1]):
            print(number, kind, detail)
    elif len(args) >= 2 and args[0] == "--write":
        page, outputs = args[1], args[2:]
        programs = [item for item in items(page) if item[1] != "excerpt"]
        if len(programs) != len(outputs):
            fail(f"{page} has {len(programs)} C++ programs, the build {len(outputs)}: reconfigure the build")
        for (_, _, _, source), output in zip(programs, outputs):
            with open(output, "w", encoding="utf-8") as out:
                out.write("// Extracted from the documentation at build time.\n" + source)
    elif len(args) == 3 and args[0] == "--check-excerpt":
        check_excerpt(args[1], int(args[2]))
    elif len(args) >= 2 and args[0] == "--check-pages":
        root, configured = args[1], sorted(args[2:])
        present = sorted(["README.md"] + [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md"))])
        if present != configured:
            fail(f"the build tests the blocks of {configured}, the pages are {present}: reconfigure the build")
    else:
        sys.exit(__doc__)


main(sys.argv[1:])
