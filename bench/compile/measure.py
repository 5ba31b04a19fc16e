#!/usr/bin/env python3
"""Compile-time benchmark. Every time is the wall time of one compiler process; the files are
compiled in rounds, each round compiling every file once, so that the machine's noise falls on
all of them alike, and each figure takes the median over the rounds.

Files compiled:
  ops<n>.cpp      n = 25, 50, 100, 200 operators of 16 kernels, one static dispatch site each
                  (generate.py), compiled to an object with -O2; 3 rounds.
  floor<n>.cpp    n = 100, 200: the same operators without fluidk's dispatch (generate.py N OUT
                  floor): the 16 kernels as static members, each call site building the context
                  by hand and calling the kernel; the same way, in the same rounds.
  baseline.cpp    the headers from outside include/fluidk that fluidk's own headers include
                  directly in fluidk/executor.hpp's include tree, in the order the compiler
                  first reads them: the compiler's -H listing of a file that includes
                  fluidk/executor.hpp, each header whose includer is a header of
                  include/fluidk (the standard library, Boost, the compiler's intrinsics).
                  Made anew in every run, so that it follows the headers as they change; it is
                  everything outside fluidk that the executor's tree compiles.
  executor.cpp    #include <fluidk/executor.hpp> and nothing else.
  (separate)      executor.cpp again, with -DFLUIDK_SEPARATE_RUNTIME (and without
                  FLUIDK_RUNTIME_DEFINE): a file of a program that compiles the runtime once.
  declarations.cpp  every header of include/fluidk in executor.cpp's tree (the same -H listing),
                  with -DFLUIDK_SEPARATE_RUNTIME -DFLUIDK_SEPARATE_CPU_KERNELS: what executor.cpp
                  compiles without the bodies of the runtime's functions and of the CPU transform
                  kernels, a floor under it that no change to those bodies lowers.
  fluidk.cpp      #include <fluidk/fluidk.hpp> and nothing else.
The last five with -fsyntax-only, 5 rounds.

Prints a line per file, then the figures:
  VALUE compile.ms_per_op <ms>               t(200 operators) / 200
  VALUE compile.marginal_ms_per_op <ms>      (t(200 operators) - t(100 operators)) / 100
  RATIO compile.scaling_200_over_100 <r>     t(200 operators) / t(100 operators); 2.0 is linear
  VALUE compile.baseline_headers <n>         how many headers baseline.cpp includes
  VALUE compile.baseline_s <s>               t(baseline.cpp)
  VALUE compile.executor_header_s <s>        t(executor.cpp)
  VALUE compile.separate_executor_s <s>      t(separate)
  VALUE compile.fluidk_header_s <s>          t(fluidk.cpp)
  RATIO compile.executor_header.vs_baseline <r>    t(executor.cpp) / t(baseline.cpp)
  RATIO compile.separate_executor.vs_baseline <r>  t(separate) / t(baseline.cpp)
  RATIO compile.executor_declarations.vs_baseline <r>  t(declarations.cpp) / t(baseline.cpp)
  RATIO compile.hundred_ops.vs_baseline <r>  (t(200 operators) - t(100 operators)) / t(baseline.cpp):
                                             the cost of 100 more operators at -O2, in units of
                                             the -fsyntax-only time of the baseline
  VALUE compile.floor_marginal_ms_per_op <ms>  (t(floor200) - t(floor100)) / 100
  RATIO compile.hundred_ops.vs_floor <r>     (t(200 operators) - t(100 operators)) /
                                             (t(floor200) - t(floor100)): what 100 operators cost
                                             through fluidk against the same without it
Every t is a median over the rounds. A figure whose file did not compile is printed as
"missing" with the reason, and the script then exits 1.
Usage: measure.py <source root> <work dir> [compiler]"""
import os
import statistics
import subprocess
import sys
import time

OP_COUNTS = (25, 50, 100, 200)
FLOOR_COUNTS = (100, 200)
OP_ROUNDS = 3
HEADER_ROUNDS = 5


def include_search_dirs(compiler):
    """The directories that #include <...> searches, in order, as the compiler reports them."""
    out = subprocess.run([compiler, "-std=c++20", "-E", "-v", "-x", "c++", os.devnull],
                         capture_output=True, text=True, check=True).stderr.splitlines()
    start = out.index("#include <...> search starts here:") + 1
    end = out.index("End of search list.", start)
    return [os.path.realpath(line.strip()) for line in out[start:end]]


def include_name(path, search_dirs):
    """How a file includes `path`: <name> through the first search directory that holds it,
    else the path itself in quotes."""
    for d in search_dirs:
        if path.startswith(d + os.sep):
            return "<%s>" % os.path.relpath(path, d)
    return '"%s"' % path


def tree_headers(compiler, include_dir, source):
    """(outside, inside): the headers outside include/fluidk that a header inside it includes
    directly, and fluidk's own headers (.ipp parts left out: their header includes them), each
    in the order of the compiler's -H listing of `source` (which includes fluidk's headers). A
    header read once is not listed again where it is included again, but every header outside
    fluidk in the tree is reached through one of the first list, so together they compile all
    of it."""
    fluidk_dir = os.path.realpath(os.path.join(include_dir, "fluidk"))
    listing = subprocess.run([compiler, "-std=c++20", "-H", "-fsyntax-only", "-I" + include_dir, source],
                             capture_output=True, text=True)
    if listing.returncode != 0:
        raise RuntimeError("%s -H of %s failed: %s" % (compiler, os.path.basename(source),
                                                       first_error(listing.stderr)))
    inside = lambda path: path.startswith(fluidk_dir + os.sep)
    by_depth = {0: os.path.realpath(source)}
    headers, own = [], []
    for line in listing.stderr.splitlines():
        # "... /path": the number of dots is the include depth; other lines (the list of
        # headers that may want include guards, at the end) are not part of the tree.
        depth = len(line) - len(line.lstrip("."))
        if depth == 0 or line[depth:depth + 1] != " ":
            continue
        path = os.path.realpath(line[depth + 1:])
        by_depth[depth] = path
        if inside(by_depth.get(depth - 1, "")) and not inside(path) and path not in headers:
            headers.append(path)
        if inside(path) and not path.endswith(".ipp") and path not in own:
            own.append(path)
    return headers, own


def first_error(stderr):
    lines = [line for line in stderr.splitlines() if "error:" in line]
    return (lines or stderr.splitlines() or ["no output"])[0].strip()


def timed(command):
    """(wall seconds, peak resident KiB) of one process; RuntimeError with the compiler's first
    error if it fails."""
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)  # this process's own peak, not the largest child's
    seconds = time.monotonic() - start
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if process.returncode != 0:
        raise RuntimeError("did not compile: " + first_error(stderr))
    return seconds, usage.ru_maxrss


def main():
    root, work = sys.argv[1], sys.argv[2]
    compiler = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("CXX", "g++")
    os.makedirs(work, exist_ok=True)
    include_dir = os.path.join(root, "include")
    generate = os.path.join(root, "bench", "compile", "generate.py")

    def write(name, text):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    # What each file is and how it is compiled; times[name] collects its rounds.
    commands, failed = {}, {}
    for n in OP_COUNTS:
        source = os.path.join(work, "ops%d.cpp" % n)
        subprocess.run([sys.executable, generate, str(n), source], check=True)
        commands["ops%d" % n] = [compiler, "-std=c++20", "-O2", "-I" + include_dir, "-c", source,
                                 "-o", os.path.join(work, "ops%d.o" % n)]
    for n in FLOOR_COUNTS:
        source = os.path.join(work, "floor%d.cpp" % n)
        subprocess.run([sys.executable, generate, str(n), source, "floor"], check=True)
        commands["floor%d" % n] = [compiler, "-std=c++20", "-O2", "-I" + include_dir, "-c", source,
                                   "-o", os.path.join(work, "floor%d.o" % n)]
    syntax = [compiler, "-std=c++20", "-fsyntax-only", "-I" + include_dir]
    executor = write("executor.cpp", "#include <fluidk/executor.hpp>\n")
    headers = []
    try:
        headers, own = tree_headers(compiler, include_dir, executor)
        search_dirs = include_search_dirs(compiler)
        baseline = write("baseline.cpp",
                         "// The headers from outside fluidk that fluidk/executor.hpp's tree includes.\n" +
                         "".join("#include %s\n" % include_name(h, search_dirs) for h in headers))
        commands["baseline"] = syntax + [baseline]
        declarations = write("declarations.cpp",
                             "// Every header of fluidk in fluidk/executor.hpp's tree, compiled in the\n"
                             "// separate modes: the header-only file without the bodies of the runtime's\n"
                             "// functions and of the CPU transform kernels.\n" +
                             "".join("#include %s\n" % include_name(h, search_dirs + [os.path.realpath(include_dir)])
                                     for h in own))
        commands["declarations"] = syntax + ["-DFLUIDK_SEPARATE_RUNTIME", "-DFLUIDK_SEPARATE_CPU_KERNELS",
                                             declarations]
    except RuntimeError as e:
        failed["baseline"] = failed["declarations"] = str(e)
    commands["executor"] = syntax + [executor]
    commands["separate"] = syntax + ["-DFLUIDK_SEPARATE_RUNTIME", executor]
    commands["fluidk"] = syntax + [write("fluidk.cpp", "#include <fluidk/fluidk.hpp>\n")]

    times = {name: [] for name in commands}
    peaks = {name: 0 for name in commands}
    for round_ in range(max(OP_ROUNDS, HEADER_ROUNDS)):
        for name, command in commands.items():
            if name in failed or (name.startswith(("ops", "floor")) and round_ >= OP_ROUNDS):
                continue
            try:
                seconds, peak_kib = timed(command)
            except RuntimeError as e:
                failed[name] = str(e)
                continue
            times[name].append(seconds)
            peaks[name] = max(peaks[name], peak_kib)
    t = {name: statistics.median(runs) for name, runs in times.items() if runs and name not in failed}

    def spread(name):
        return "%.2f-%.2f s over %d rounds" % (min(times[name]), max(times[name]), len(times[name]))

    for n in OP_COUNTS:
        name = "ops%d" % n
        if name in t:
            print("compile: %4d operators x 16 kernels: %7.2f s (%s), peak %5.0f MiB, %6.1f ms per operator" %
                  (n, t[name], spread(name), peaks[name] / 1024, 1000 * t[name] / n))
    for n in FLOOR_COUNTS:
        name = "floor%d" % n
        if name in t:
            print("compile: %4d operators x 16 kernels without fluidk's dispatch (the floor): %7.2f s (%s), "
                  "peak %5.0f MiB" % (n, t[name], spread(name), peaks[name] / 1024))
    if headers:
        print("compile: baseline: the %d headers from outside fluidk that fluidk's headers include "
              "directly in fluidk/executor.hpp's tree: %s" %
              (len(headers), " ".join(include_name(h, search_dirs) for h in headers)))
    for name, what in (("baseline", "the baseline"), ("executor", "fluidk/executor.hpp alone"),
                       ("separate", "fluidk/executor.hpp alone, FLUIDK_SEPARATE_RUNTIME"),
                       ("declarations", "fluidk/executor.hpp's tree of fluidk headers, both separate modes"),
                       ("fluidk", "fluidk/fluidk.hpp alone")):
        if name in t:
            print("compile: %s -fsyntax-only of %s: %.2f s (%s), peak %.0f MiB" %
                  (os.path.basename(compiler), what, t[name], spread(name), peaks[name] / 1024))
    for name, reason in failed.items():
        print("compile: %s: %s" % (name, reason))

    def figure(kind, label, needs, value, form):
        missing = [n for n in needs if n not in t]
        if missing:
            print("%s compile.%s missing  (%s)" % (kind, label, "; ".join(
                "%s: %s" % (n, failed.get(n, "not measured")) for n in missing)))
        else:
            print(("%s compile.%s " + form) % (kind, label, value()))

    figure("VALUE", "ms_per_op", ["ops200"], lambda: 1000 * t["ops200"] / 200, "%.1f")
    figure("VALUE", "marginal_ms_per_op", ["ops100", "ops200"],
           lambda: 10 * (t["ops200"] - t["ops100"]), "%.1f")
    figure("RATIO", "scaling_200_over_100", ["ops100", "ops200"], lambda: t["ops200"] / t["ops100"], "%.2f")
    figure("VALUE", "baseline_headers", ["baseline"], lambda: len(headers), "%d")
    figure("VALUE", "baseline_s", ["baseline"], lambda: t["baseline"], "%.2f")
    figure("VALUE", "executor_header_s", ["executor"], lambda: t["executor"], "%.2f")
    figure("VALUE", "separate_executor_s", ["separate"], lambda: t["separate"], "%.2f")
    figure("VALUE", "fluidk_header_s", ["fluidk"], lambda: t["fluidk"], "%.2f")
    figure("RATIO", "executor_header.vs_baseline", ["executor", "baseline"],
           lambda: t["executor"] / t["baseline"], "%.2f")
    figure("RATIO", "separate_executor.vs_baseline", ["separate", "baseline"],
           lambda: t["separate"] / t["baseline"], "%.2f")
    figure("RATIO", "executor_declarations.vs_baseline", ["declarations", "baseline"],
           lambda: t["declarations"] / t["baseline"], "%.2f")
    figure("RATIO", "hundred_ops.vs_baseline", ["ops100", "ops200", "baseline"],
           lambda: (t["ops200"] - t["ops100"]) / t["baseline"], "%.2f")
    figure("VALUE", "floor_marginal_ms_per_op", ["floor100", "floor200"],
           lambda: 10 * (t["floor200"] - t["floor100"]), "%.1f")
    figure("RATIO", "hundred_ops.vs_floor", ["ops100", "ops200", "floor100", "floor200"],
           lambda: (t["ops200"] - t["ops100"]) / (t["floor200"] - t["floor100"]), "%.2f")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
