#!/usr/bin/env python3
"""Checks bench/ratios.py on a made-up transforms_bench report: each RATIO line is the smallest
ratio of the medians over the sizes it names (sizes above L2 only where it says so), the fused
pass is compared with its sequential steps, a line against oneDNN names the implementation oneDNN
ran at that size, and runs that are not medians or that failed are left out; and its network
figures (--network): medians over the rounds, the memory ratio, and figures not measured named
as missing.
Usage: ratios_test.py <bench/ratios.py>"""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
L2 = 1 << 20
SMALL, LARGE = "1x8x16x16", "1x64x64x72"  # 8 KiB and 1.125 MiB of float: below and above L2
SMALL_BYTES, LARGE_BYTES = 4 * 8 * 16 * 16, 4 * 64 * 64 * 72
failures = []


def median(name, bps, label="", aggregate="median", error=False):
    b = {"name": name + "_median", "run_name": name + "/real_time", "run_type": "aggregate",
         "aggregate_name": aggregate, "bytes_per_second": bps}
    if label:
        b["label"] = label
    if error:
        b["error_occurred"] = True
    return b


def report(benchmarks):
    return {"context": {"caches": [{"type": "Data", "level": 1, "size": 32768},
                                   {"type": "Unified", "level": 2, "size": L2}]},
            "benchmarks": benchmarks}


def run(rep, *flags):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        with open(path, "w") as f:
            json.dump(rep, f)
        out = subprocess.run([sys.executable, SCRIPT, path, *flags], capture_output=True, text=True)
    return out.returncode, [line for line in out.stdout.splitlines() if line.startswith("RATIO ")]


def expect(what, got, wanted):
    if got != wanted:
        failures.append("%s:\n  got    %r\n  wanted %r" % (what, got, wanted))


benchmarks = [
    # NCHW -> NHWC: against oneDNN 2.0 then 0.5 (the smallest, above L2), against memcpy 0.25
    # below L2 (left out) and 0.8 above it.
    median("nchw_to_nhwc/fluidk/%s/t1" % SMALL, 2.0e9),
    median("nchw_to_nhwc/onednn/%s/t1" % SMALL, 1.0e9, "jit:uni"),
    median("nchw_to_nhwc/memcpy/%s/t1" % SMALL, 8.0e9),
    median("nchw_to_nhwc/fluidk/%s/t1" % LARGE, 4.0e9),
    median("nchw_to_nhwc/onednn/%s/t1" % LARGE, 8.0e9, "simple:any"),
    median("nchw_to_nhwc/memcpy/%s/t1" % LARGE, 5.0e9),
    # Two threads against oneDNN on two threads: 3.0.
    median("nchw_to_nhwc/fluidk/%s/t2" % LARGE, 6.0e9),
    median("nchw_to_nhwc/onednn/%s/t2" % LARGE, 2.0e9, "jit:uni"),
    # A mean, a failed run and a run of another name: left out.
    median("nchw_to_nhwc/fluidk/%s/t1" % SMALL, 0.1e9, aggregate="mean"),
    median("nchw_to_nhwc/fluidk/%s/t1" % LARGE, 0.1e9, error=True),
    median("not_a_figure/fluidk/%s/t1" % LARGE, 0.1e9),
    # f32 -> f16 against oneDNN's reference reorder.
    median("f32_to_f16/fluidk/%s/t1" % LARGE, 9.0e9),
    median("f32_to_f16/onednn/%s/t1" % LARGE, 0.06e9, "ref:any"),
    # The fused pass against its two steps, above L2: 1.5.
    median("fused_nChw8c_f32_to_nchw_f16/fluidk/%s/t1" % LARGE, 6.0e9),
    median("fused_nChw8c_f32_to_nchw_f16/sequential/%s/t1" % LARGE, 4.0e9),
]
assert SMALL_BYTES < L2 < LARGE_BYTES
rc, lines = run(report(benchmarks))
expect("exit status", rc, 0)
expect("RATIO lines", lines, [
    "RATIO transform.nchw_to_nhwc.vs_onednn.min_over_sizes 0.500  (at 1.125 MiB; oneDNN ran simple:any)",
    "RATIO transform.nchw_to_nhwc.vs_onednn.t2.min_over_sizes 3.000  (at 1.125 MiB; oneDNN ran jit:uni)",
    "RATIO transform.nchw_to_nhwc.vs_memcpy.min_over_sizes_above_l2 0.800  (at 1.125 MiB)",
    "RATIO transform.f32_to_f16.vs_onednn.min_over_sizes 150.000  (at 1.125 MiB; oneDNN ran ref:any)",
    "RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2 1.500  (at 1.125 MiB)",
])

# fluidk's detected L2 in the context serves where Google Benchmark names no cache; without
# either, each figure above L2 is printed as missing, with the reason, never dropped.
rc, lines = run({"context": {"fluidk_l2_bytes": str(L2)}, "benchmarks": benchmarks})
expect("fluidk's L2: exit status", rc, 0)
expect("fluidk's L2: RATIO lines", [line for line in lines if "above_l2" in line], [
    "RATIO transform.nchw_to_nhwc.vs_memcpy.min_over_sizes_above_l2 0.800  (at 1.125 MiB)",
    "RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2 1.500  (at 1.125 MiB)",
])
# Sizes fluidk's detection assumed (the machine gave none): the figures above L2 say so.
rc, lines = run({"context": {"fluidk_l2_bytes": str(L2), "fluidk_caches_from": "assumed"}, "benchmarks": benchmarks})
expect("assumed L2: RATIO lines", [line for line in lines if "above_l2" in line], [
    "RATIO transform.nchw_to_nhwc.vs_memcpy.min_over_sizes_above_l2 0.800  (at 1.125 MiB; L2 assumed, 1 MiB: "
    "the machine gave no cache sizes)",
    "RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2 1.500  (at 1.125 MiB; "
    "L2 assumed, 1 MiB: the machine gave no cache sizes)",
])
rc, lines = run({"context": {}, "benchmarks": benchmarks})
no_l2 = "  (no L2 size: neither fluidk's detection nor the benchmark's context gave one)"
expect("no L2: RATIO lines", [line for line in lines if "above_l2" in line], [
    "RATIO transform.nchw_to_nhwc.vs_memcpy.min_over_sizes_above_l2 missing" + no_l2,
    "RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2 missing" + no_l2,
])

# --markdown: the same figures, without the notes.
rc, lines = run(report(benchmarks), "--markdown")
expect("markdown exit status", rc, 0)
expect("markdown RATIO lines", [" ".join(line.split()[:3]) for line in lines], [
    "RATIO transform.nchw_to_nhwc.vs_onednn.min_over_sizes 0.500",
    "RATIO transform.nchw_to_nhwc.vs_onednn.t2.min_over_sizes 3.000",
    "RATIO transform.nchw_to_nhwc.vs_memcpy.min_over_sizes_above_l2 0.800",
    "RATIO transform.f32_to_f16.vs_onednn.min_over_sizes 150.000",
    "RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2 1.500",
])
expect("markdown notes", [line for line in lines if "(" in line], [])

# The network shapes: a table and ratios of their own, the label found there too.
shape = "1x64x56x56"
rc, lines = run(report([
    median("shapes/nchw_to_nhwc/fluidk/%s/t1" % shape, 3.0e9),
    median("shapes/nchw_to_nhwc/onednn/%s/t1" % shape, 2.0e9, "jit:uni"),
]))
expect("network exit status", rc, 0)
expect("network RATIO lines", lines, [
    "RATIO transform.nchw_to_nhwc.vs_onednn.min_over_network_shapes 1.500  (at %s; oneDNN ran jit:uni)" % shape])

# No medians at all: a failure, not an empty success.
rc, lines = run(report([median("nchw_to_nhwc/fluidk/%s/t1" % LARGE, 1e9, aggregate="mean")]))
expect("exit status without medians", rc != 0, True)


# --network: bench/network.py's report. Each side's time is the median over the rounds of the
# medians its processes printed; a side's memory is peak RSS minus start RSS (batch 1, one thread),
# the median over the rounds; a figure a side did not print is "missing", with the reason.
def network_run(model, batch, side, round_, ms, **figures):
    return {"model": model, "batch": batch, "threads": 1, "side": side, "round": round_, "median_ms": ms,
            **figures}


def rss(start_mib, grown_mib):
    return {"start_rss_kb": start_mib * 1024, "peak_rss_kb": (start_mib + grown_mib) * 1024}


network_runs = []
for r, (mine, ref, grown, overhead) in enumerate(((10, 6, 100, 5), (14, 3, 120, 7), (12, 9, 110, 6))):
    network_runs += [network_run("resnet18", 1, "fluidk", r, mine, overhead_percent=overhead, **rss(10, grown)),
                     network_run("resnet18", 1, "onnxruntime", r, ref, **rss(50, 100)),
                     network_run("resnet18", 8, "fluidk", r, 80, overhead_percent=50, **rss(10, 900)),
                     network_run("resnet18", 8, "onnxruntime", r, 160, **rss(50, 10))]
    # run-onnx without the memory and overhead lines.
    network_runs += [network_run("squeezenet11", 1, "fluidk", r, 4),
                     network_run("squeezenet11", 1, "onnxruntime", r, 2, **rss(50, 40))]
network_runs += [network_run("squeezenet11", 8, "fluidk", 0, 30), network_run("squeezenet11", 8, "onnxruntime", 0, 3)]
network_report = {"models": ["resnet18", "squeezenet11"], "batches": [1, 8], "threads": [1], "runs": network_runs,
                  "missing": {"fluidk.peak_rss_kb": "run-onnx printed no peak_rss_kb line",
                              "fluidk.start_rss_kb": "run-onnx printed no start_rss_kb line",
                              "fluidk.overhead_percent": "run-onnx printed no overhead_percent line"}}


def run_network(rep):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "network.json")
        with open(path, "w") as f:
            json.dump(rep, f)
        out = subprocess.run([sys.executable, SCRIPT, "--network", path], capture_output=True, text=True)
    return out.returncode, [line for line in out.stdout.splitlines() if line.startswith(("RATIO ", "VALUE "))]


missing_memory = "run-onnx printed no peak_rss_kb line; run-onnx printed no start_rss_kb line"
rc, lines = run_network(network_report)
expect("network exit status", rc, 0)
expect("network lines", lines, [
    "RATIO network.resnet18.b1.t1.vs_onnxruntime 0.500",
    "RATIO network.resnet18.b8.t1.vs_onnxruntime 2.000",
    "RATIO network.resnet18.b1.memory.vs_onnxruntime 1.100",
    "RATIO network.squeezenet11.b1.t1.vs_onnxruntime 0.500",
    "RATIO network.squeezenet11.b8.t1.vs_onnxruntime 0.100",
    "RATIO network.squeezenet11.b1.memory.vs_onnxruntime missing  (%s)" % missing_memory,
    "VALUE network.resnet18.b1.t1.fluidk_ms 12.000",
    "VALUE network.resnet18.b1.t1.onnxruntime_ms 6.000",
    "VALUE network.resnet18.b8.t1.fluidk_ms 80.000",
    "VALUE network.resnet18.b8.t1.onnxruntime_ms 160.000",
    "VALUE network.resnet18.b1.fluidk_memory_mib 110.0",
    "VALUE network.resnet18.b1.onnxruntime_memory_mib 100.0",
    "VALUE network.resnet18.overhead_percent 6.00",
    "VALUE network.squeezenet11.b1.t1.fluidk_ms 4.000",
    "VALUE network.squeezenet11.b1.t1.onnxruntime_ms 2.000",
    "VALUE network.squeezenet11.b8.t1.fluidk_ms 30.000",
    "VALUE network.squeezenet11.b8.t1.onnxruntime_ms 3.000",
    "VALUE network.squeezenet11.b1.fluidk_memory_mib missing  (%s)" % missing_memory,
    "VALUE network.squeezenet11.b1.onnxruntime_memory_mib 40.0",
    "VALUE network.squeezenet11.overhead_percent missing  (run-onnx printed no overhead_percent line)",
])

# A time not measured (ONNX Runtime's at batch 8): "missing", and a failure.
network_report["runs"] = [r for r in network_runs if not (r["batch"] == 8 and r["side"] == "onnxruntime")]
rc, lines = run_network(network_report)
expect("network exit status without a time", rc != 0, True)
expect("network line without a time", [line for line in lines if ".b8.t1.vs_" in line], [
    "RATIO network.resnet18.b8.t1.vs_onnxruntime missing  (not measured)",
    "RATIO network.squeezenet11.b8.t1.vs_onnxruntime missing  (not measured)",
])

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: ratios.py gives the smallest ratios, where they were and what oneDNN ran; the network figures")
