#!/usr/bin/env python3
"""Compile-time benchmark: for n = 25, 50, 100, 200 operators (16 kernels each, one static
dispatch site each), compiles the generated translation unit with the C++ compiler and
records wall time and peak memory. Prints one line per size and the figures:
  VALUE compile.ms_per_op <ms>            compile time of the 200-operator file, per operator
  VALUE compile.marginal_ms_per_op <ms>   (t(200) - t(100)) / 100: the cost of one more operator
  RATIO compile.scaling_200_over_100 <r>  t(200) / t(100); 2.0 is linear
  VALUE compile.executor_header_s <s>     g++ -fsyntax-only of a file that includes only
                                          fluidk/executor.hpp, the median of 5
  VALUE compile.fluidk_header_s <s>       the same for fluidk/fluidk.hpp
Usage: measure.py <source root> <work dir> [compiler]"""
import os
import resource
import subprocess
import sys
import time

root, work = sys.argv[1], sys.argv[2]
compiler = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("CXX", "g++")
os.makedirs(work, exist_ok=True)
generate = os.path.join(root, "bench", "compile", "generate.py")
flags = ["-std=c++20", "-O2", "-I" + os.path.join(root, "include"), "-c"]

def compile_once(n):
    source = os.path.join(work, f"ops{n}.cpp")
    subprocess.run([sys.executable, generate, str(n), source], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.monotonic()
    subprocess.run([compiler, *flags, source, "-o", os.path.join(work, f"ops{n}.o")], check=True)
    seconds = time.monotonic() - start
    # ru_maxrss of children is the largest child so far: measure sizes in increasing order.
    peak_kb = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    return seconds, peak_kb

results = {}
for n in (25, 50, 100, 200):
    runs = sorted(compile_once(n) for _ in range(3 if n <= 50 else 1))
    seconds, peak_kb = runs[len(runs) // 2]
    results[n] = seconds
    print(f"compile: {n:4d} operators x 16 kernels: {seconds:7.2f} s, peak {peak_kb / 1024:7.0f} MiB, "
          f"{1000 * seconds / n:6.1f} ms per operator")
print(f"VALUE compile.ms_per_op {1000 * results[200] / 200:.1f}")
print(f"VALUE compile.marginal_ms_per_op {1000 * (results[200] - results[100]) / 100:.1f}")
print(f"RATIO compile.scaling_200_over_100 {results[200] / results[100]:.2f}")

# What a user feels when a file includes one header and nothing else: the front end alone.
def syntax_seconds(header):
    source = os.path.join(work, "include_" + header.replace("/", "_").replace(".", "_") + ".cpp")
    with open(source, "w") as f:
        f.write("#include <fluidk/%s>\n" % header)
    times = []
    for _ in range(5):
        start = time.monotonic()
        subprocess.run([compiler, "-std=c++20", "-fsyntax-only", "-I" + os.path.join(root, "include"), source],
                       check=True)
        times.append(time.monotonic() - start)
    return sorted(times)[2]

for header, figure in (("executor.hpp", "executor_header_s"), ("fluidk.hpp", "fluidk_header_s")):
    seconds = syntax_seconds(header)
    print(f"compile: g++ -fsyntax-only of fluidk/{header} alone: {seconds:.2f} s (median of 5)")
    print(f"VALUE compile.{figure} {seconds:.2f}")
