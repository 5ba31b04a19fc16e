"""Checks that ninja recorded the headers of each .cu object (nvcc_depfile in meson.build).

    depfile_check.py <build root> <object>...

Each object's dependencies, as `ninja -t deps` gives them, must name one of fluidk's headers:
otherwise ninja does not rebuild the object when a header changes, and the build runs stale
CUDA code. Prints one line per object and exits 1 if any has none.
"""
import subprocess
import sys


def main() -> int:
    root, objects = sys.argv[1], sys.argv[2:]
    if not objects:
        print("FAIL: no .cu objects given")
        return 1
    failed = 0
    for obj in objects:
        out = subprocess.run(["ninja", "-C", root, "-t", "deps", obj], capture_output=True, text=True).stdout
        headers = [
            line.strip()
            for line in out.splitlines()[1:]
            if ("include/fluidk/" in line or "examples/ops/" in line) and not line.strip().endswith(".cu")
        ]
        if headers:
            print(f"ok: {obj}: {len(headers)} of the project's headers, {headers[0]} first")
        else:
            failed += 1
            print(f"FAIL: {obj}: ninja records none of the project's headers:\n{out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
