#!/usr/bin/env python3
"""What a file compiled with FLUIDK_SEPARATE_RUNTIME (and without FLUIDK_RUNTIME_DEFINE) includes:
the declarations of the runtime path, and none of what only the runtime's own file calls. For
<fluidk/executor.hpp> and for the runtime path's headers together (<fluidk/separate_runtime.hpp>),
the compiler's include list (-H) must hold no CPU transform kernels (fluidk/transforms/cpu.hpp,
cpu_kernels.hpp, transforms/detail/), no intrinsics header (<immintrin.h> and the *intrin.h it
brings) and no Boost.Hana; <fluidk/executor.hpp>'s must also hold neither <chrono> (only the timing of
runs reads the clock) nor <cmath> (only the comparison of attributes calls isnan), which the runtime's
own file includes. The same files compiled header-only (no FLUIDK_SEPARATE_RUNTIME) must
include the CPU transforms, so that the check is seen to find them.
Usage: separate_includes_check.py <C++ compiler> <include dir> <work dir>
"""
import os
import re
import subprocess
import sys

compiler, include, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)

FORBIDDEN = [
    (re.compile(r"fluidk/transforms/(cpu\.hpp|cpu_kernels\.hpp|detail/)"), "the CPU transform kernels"),
    (re.compile(r"intrin\.h$"), "an intrinsics header"),
    (re.compile(r"boost/hana"), "Boost.Hana"),
]
# What the executor's declarations need neither, besides the above.
EXECUTOR_FORBIDDEN = [
    (re.compile(r"/chrono$"), "<chrono>"),
    (re.compile(r"/cmath$"), "<cmath>"),
]


def includes(header, defines):
    source = os.path.join(work, "includes_" + re.sub(r"\W", "_", header) + ".cpp")
    with open(source, "w") as f:
        f.write("#include <%s>\n" % header)
    run = subprocess.run([compiler, "-std=c++20", "-fsyntax-only", "-H", *defines, "-I" + include, source],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("%s with %s does not compile:\n%s" % (header, defines or "no defines", run.stderr))
    return [line.split(" ", 1)[1].strip() for line in run.stderr.splitlines() if re.match(r"^\.+ ", line)]


failed = False
for header in ("fluidk/executor.hpp", "fluidk/separate_runtime.hpp"):
    separate = includes(header, ["-DFLUIDK_SEPARATE_RUNTIME"])
    forbidden = FORBIDDEN + (EXECUTOR_FORBIDDEN if header == "fluidk/executor.hpp" else [])
    found = [(path, what) for path in separate for pattern, what in forbidden if pattern.search(path)]
    own = sum("fluidk/" in path for path in separate)
    print("%s, FLUIDK_SEPARATE_RUNTIME: %d headers, %d of them fluidk's" % (header, len(separate), own))
    for path, what in found:
        print("  includes %s: %s" % (what, path))
        failed = True
    whole = includes(header, [])
    if not any(FORBIDDEN[0][0].search(path) for path in whole):
        print("  header-only, it includes no CPU transforms: the check cannot see what it looks for")
        failed = True
sys.exit(1 if failed else 0)
