#!/usr/bin/env python3
"""Turns transforms_bench's JSON output into the RATIO lines of the transforms issue.

Each value is fluidk's median throughput over the reference's median throughput (bytes read
plus written per second, same buffers, same run), so higher is better. The medians of every
benchmark are printed first, as a table; the RATIO lines come last, in the issue's order.
"""
import json
import sys

# (RATIO name, fluidk benchmark, reference benchmark), both "<figure>/<implementation>/<size>/t<threads>".
RATIOS = [
    ("transform.nChw8c_to_nchw.vs_onednn", "nChw8c_to_nchw/fluidk/large/t1", "nChw8c_to_nchw/onednn/large/t1"),
    ("transform.nchw_to_nChw8c.vs_onednn", "nchw_to_nChw8c/fluidk/large/t1", "nchw_to_nChw8c/onednn/large/t1"),
    ("transform.nChw8c_to_nchw.vs_onednn.t2", "nChw8c_to_nchw/fluidk/large/t2", "nChw8c_to_nchw/onednn/large/t2"),
    ("transform.nchw_to_nChw8c.vs_onednn.t2", "nchw_to_nChw8c/fluidk/large/t2", "nchw_to_nChw8c/onednn/large/t2"),
    ("transform.nchw_to_nhwc.vs_onednn", "nchw_to_nhwc/fluidk/large/t1", "nchw_to_nhwc/onednn/large/t1"),
    ("transform.nchw_to_nhwc.vs_memcpy", "nchw_to_nhwc/fluidk/large/t1", "nchw_to_nhwc/memcpy/large/t1"),
    ("transform.f32_to_f16.vs_memcpy", "f32_to_f16/fluidk/large/t1", "f32_to_f16/memcpy/large/t1"),
    ("transform.f32_to_bf16.vs_memcpy", "f32_to_bf16/fluidk/large/t1", "f32_to_bf16/memcpy/large/t1"),
    ("transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential", "fused_nChw8c_f32_to_nchw_f16/fluidk/large/t1",
     "fused_nChw8c_f32_to_nchw_f16/sequential/large/t1"),
]


def medians(report):
    out = {}
    for b in report.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            name = b["run_name"]
            if name.endswith("/real_time"):
                name = name[: -len("/real_time")]
            out[name] = b["bytes_per_second"]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ratios.py <transforms_bench JSON output>")
    with open(sys.argv[1]) as f:
        report = json.load(f)
    bps = medians(report)
    if not bps:
        sys.exit("ratios.py: no medians in %s (run with --benchmark_repetitions > 1)" % sys.argv[1])

    print("%-52s %10s" % ("median (bytes read + written)", "GB/s"))
    for name in sorted(bps):
        print("%-52s %10.2f" % (name, bps[name] / 1e9))
    # The same figures on the cache-resident tensor, for information (not the targets).
    print()
    for ratio, mine, ref in RATIOS:
        mine_s, ref_s = mine.replace("/large/", "/small/"), ref.replace("/large/", "/small/")
        if mine_s in bps and ref_s in bps:
            print("small-tensor %s %.3f" % (ratio, bps[mine_s] / bps[ref_s]))
    print()

    # A filtered run (scripts/bench --benchmark_filter=...) leaves some figures out: say which, and
    # fail only when there is nothing to report at all.
    printed = 0
    for ratio, mine, ref in RATIOS:
        if mine in bps and ref in bps:
            print("RATIO %s %.3f" % (ratio, bps[mine] / bps[ref]))
            printed += 1
        else:
            print("ratios.py: %s: no median for %s" % (ratio, mine if mine not in bps else ref), file=sys.stderr)
    sys.exit(0 if printed else 1)


if __name__ == "__main__":
    main()
