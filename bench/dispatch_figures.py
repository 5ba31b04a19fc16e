#!/usr/bin/env python3
"""Prints the dispatch and executor figures from Google Benchmark JSON files (medians) and
from callgrind instruction counts.
Usage: dispatch_figures.py <dispatch.json> <executor.json> <static_instr> <direct_instr> <calls>
where *_instr are callgrind totals of `dispatch_bench --calls=static|direct <calls>` minus the
same with 0 calls (so they count the calls only)."""
import json
import sys

def medians(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") == "median":
            out[b["run_name"]] = b
    return out

dispatch = medians(sys.argv[1])
executor = medians(sys.argv[2])
static_instr, direct_instr, calls = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])

def ns(bench, name):
    b = bench[name]
    scale = {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
    return b["cpu_time"] * scale

direct, static = ns(dispatch, "BM_dispatch_direct"), ns(dispatch, "BM_dispatch_static")
runtime, fluid = ns(dispatch, "BM_dispatch_runtime"), ns(dispatch, "BM_dispatch_fluid_style")
print(f"dispatch: direct {direct:.2f} ns, static {static:.2f} ns, runtime {runtime:.2f} ns, "
      f"fluid-style {fluid:.2f} ns per call (CPU time, medians)")
print(f"dispatch: instructions per call: static {static_instr / calls:.1f}, direct {direct_instr / calls:.1f}")
print(f"RATIO dispatch.static.vs_direct {direct / static:.3f}")
print(f"RATIO dispatch.static.vs_direct.instructions {direct_instr / static_instr:.3f}")
print(f"RATIO dispatch.runtime.vs_fluid_style {fluid / runtime:.2f}")
print(f"VALUE dispatch.runtime.ns {runtime:.2f}")
chain_length = 1000  # operators per run in executor_bench
per_op = ns(executor, "BM_executor_chain") / chain_length
fluid_per_op = ns(executor, "BM_executor_chain_fluid_style") / chain_length
print(f"VALUE executor.per_op_ns {per_op:.1f}")
print(f"RATIO executor.per_op.vs_fluid_style {fluid_per_op / per_op:.2f}")
