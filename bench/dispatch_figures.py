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
runtime, fluid = ns(dispatch, "BM_dispatch_runtime"), ns(dispatch, "BM_dispatch_runtime_fluid_style")
mixed_calls = 300  # calls per iteration of the mixed workloads in dispatch_bench
by_name = ns(dispatch, "BM_dispatch_by_name_mixed") / mixed_calls
by_name_fluid = ns(dispatch, "BM_dispatch_by_name_mixed_fluid_style") / mixed_calls
prepared = ns(dispatch, "BM_dispatch_prepared_mixed") / mixed_calls
prepared_fluid = ns(dispatch, "BM_dispatch_prepared_mixed_fluid_style") / mixed_calls
print(f"dispatch: direct {direct:.2f} ns, static {static:.2f} ns per call (CPU time, medians)")
print(f"dispatch: instructions per call: static {static_instr / calls:.1f}, direct {direct_instr / calls:.1f}")
print(f"dispatch, mixed (300 calls, 40 operators): by name {by_name:.2f} ns against {by_name_fluid:.2f} ns "
      f"Fluid-style; prepared {prepared:.2f} ns against {prepared_fluid:.2f} ns")
print(f"dispatch, single key (best case): prepared {runtime:.2f} ns against {fluid:.2f} ns Fluid-style")
print(f"RATIO dispatch.static.vs_direct {direct / static:.3f}")
print(f"RATIO dispatch.static.vs_direct.instructions {direct_instr / static_instr:.3f}")
print(f"RATIO dispatch.by_name.mixed.vs_fluid_style {by_name_fluid / by_name:.2f}")
print(f"RATIO dispatch.prepared.mixed.vs_fluid_style {prepared_fluid / prepared:.2f}")
print(f"RATIO dispatch.runtime.single_key.vs_fluid_style {fluid / runtime:.2f}")
print(f"VALUE dispatch.by_name.mixed.ns {by_name:.2f}")
print(f"VALUE dispatch.prepared.mixed.ns {prepared:.2f}")
print(f"VALUE dispatch.runtime.ns {runtime:.2f}")
program_length = 300  # operators per run in executor_bench
per_op = ns(executor, "BM_executor_program") / program_length
fluid_per_op = ns(executor, "BM_executor_program_fluid_style") / program_length
fluid_cached_per_op = ns(executor, "BM_executor_program_fluid_cached_context") / program_length
print(f"VALUE executor.per_op_ns {per_op:.1f}")
print(f"RATIO executor.per_op.vs_fluid_style {fluid_per_op / per_op:.2f}")
print(f"RATIO executor.per_op.vs_fluid_cached_context {fluid_cached_per_op / per_op:.2f}")
loop_steps = 1000  # steps per run of BM_executor_while_step
step = ns(executor, "BM_executor_while_step") / loop_steps
straight = ns(executor, "BM_executor_straight_10")
print(f"executor: a while step of 10 trivial operators {step:.1f} ns, the 10 run straight {straight:.1f} ns")
# A time over a time: lower is better, the goal is <= 1.5.
print(f"RATIO executor.while_step.vs_straight {step / straight:.2f}")
