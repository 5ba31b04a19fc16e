#!/usr/bin/env python3
"""Turns transforms_bench's JSON output into tables and the RATIO lines of the transforms.

Each ratio is fluidk's median throughput over the reference's median throughput (bytes read
plus written per second, same buffers, same run), so higher is better, taken at every size of
the sweep (benchmarks named <figure>/<implementation>/<N>x<C>x<H>x<W>/t<threads>, the float
tensor's shape); a RATIO line gives the smallest of them:
  RATIO transform.<figure>.vs_onednn.min_over_sizes             one thread, every size
  RATIO transform.<figure>.vs_onednn.t2.min_over_sizes          two threads each, every size
  RATIO transform.<figure>.vs_memcpy.min_over_sizes_above_l2    one thread, sizes above L2
  RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2
Each line ends with the size where the ratio was smallest and, against oneDNN, the implementation
oneDNN ran there (its impl_info_str: "jit:..." is generated code; "simple:any", as for the
float16 reorders of oneDNN 2.6, and "ref:any" are plain loops, element by element). A size is
above L2 when the float tensor is larger than the L2 cache of one core, as fluidk's own
detection reports it (transforms_bench writes it into the context), else Google Benchmark's;
without either, each figure above L2 is printed as missing, with the reason. The layout transforms also run at a network's shapes
(shapes/<figure>/<implementation>/<shape>/t1), one thread (NHWC -> NCHW only there); a table of
their own and, for information, the smallest ratio over them (the fused pass against its
sequential steps and memcpy, not oneDNN's element-by-element float16 reorder):
  RATIO transform.<figure>.vs_onednn.min_over_network_shapes
  RATIO transform.<figure>.vs_memcpy.min_over_network_shapes
  RATIO transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_network_shapes
Usage: ratios.py <transforms_bench JSON> [--markdown]

With --network, the network benchmark's figures instead, from bench/network.py's JSON (the
medians that run-onnx and scripts/onnx/bench_ort.js printed, per round): the median over the
rounds of each side's median time, and
  RATIO network.<model>.b<batch>.t<threads>.vs_onnxruntime     ONNX Runtime's time over fluidk's
  RATIO network.<model>.b1.memory.vs_onnxruntime               fluidk's memory over ONNX Runtime's
  VALUE network.<model>.b<batch>.t<threads>.fluidk_ms, .onnxruntime_ms
  VALUE network.<model>.b1.fluidk_memory_mib, .onnxruntime_memory_mib
  VALUE network.<model>.overhead_percent                       run-onnx's, batch 1, one thread
A side's memory is its process's peak resident set minus the resident set it had before the
model was loaded (batch 1, one thread; the median over the rounds). A figure a side did not print
is given as "missing" with the reason, not left out.
Usage: ratios.py --network <network JSON> [--markdown]
"""
import json
import re
import statistics
import sys

FIGURES = ["nChw8c_to_nchw", "nchw_to_nChw8c", "nchw_to_nhwc", "nhwc_to_nchw", "f32_to_f16", "f32_to_bf16",
           "fused_nChw8c_f32_to_nchw_f16"]
NAME = re.compile(r"^(?P<shapes>shapes/)?(?P<figure>[^/]+)/(?P<impl>[^/]+)/"
                  r"(?P<shape>(?P<n>\d+)x(?P<c>\d+)x(?P<h>\d+)x(?P<w>\d+))/t(?P<threads>\d+)$")


def read(path):
    with open(path) as f:
        return json.load(f)


def medians(report, network=False):
    """The sweep's median results, as ((figure, impl, bytes, threads), benchmark) pairs (network: of
    the network shapes, keyed by the shape's name instead of its bytes)."""
    out = []
    for b in report.get("benchmarks", []):
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median" or b.get("error_occurred"):
            continue
        name = b["run_name"]
        if name.endswith("/real_time"):
            name = name[: -len("/real_time")]
        m = NAME.match(name)
        if not m or bool(m["shapes"]) != network:
            continue
        size = 4 * int(m["n"]) * int(m["c"]) * int(m["h"]) * int(m["w"])  # bytes of the float tensor
        out.append(((m["figure"], m["impl"], m["shape"] if network else size, int(m["threads"])), b))
    return out


def load(path, network=False, report=None):
    """{(figure, impl, bytes, threads): bytes per second} of the sweep's medians (network: of
    the network shapes, keyed by the shape's name instead of its bytes), and the L2 size; from
    `report` when it was read already."""
    report = read(path) if report is None else report
    out = {key: b["bytes_per_second"] for key, b in medians(report, network)}
    # fluidk's own detection first (transforms_bench writes it into the context): Google
    # Benchmark names no cache where the hypervisor hides CPUID's topology leaf and Linux has no
    # cache folder, where fluidk still finds L2 (AMD's legacy leaves).
    fluidk_l2 = str(report.get("context", {}).get("fluidk_l2_bytes", ""))
    if fluidk_l2.isdigit() and int(fluidk_l2) > 0:
        return out, int(fluidk_l2)
    l2 = None
    for cache in report.get("context", {}).get("caches", []):
        if cache.get("level") == 2 and cache.get("type") in ("Unified", "Data"):
            l2 = cache["size"]
    return out, l2


def onednn_implementations(report, network=False):
    """{(figure, bytes or shape, threads): the implementation oneDNN ran}, from the labels that
    transforms_bench gives oneDNN's reorders (its primitive's impl_info_str, e.g. "jit:uni")."""
    return {(key[0], key[2], key[3]): b["label"]
            for key, b in medians(report, network) if key[1] == "onednn" and b.get("label")}


def ratio_line(name, value, at, shown, implementations, markdown, l2_note=""):
    """A RATIO line: where its smallest value was (at, shown as `shown`), against oneDNN the
    implementation oneDNN ran there, and for a figure over the sizes above L2, `l2_note` (where
    the L2 size was assumed)."""
    line = "RATIO %s %.3f" % (name, value)
    if markdown:
        return line
    note = "at " + shown
    figure, threads = name.split(".")[1], 2 if ".vs_onednn.t2." in name else 1
    if ".vs_onednn." in name and (figure, at, threads) in implementations:
        note += "; oneDNN ran " + implementations[(figure, at, threads)]
    if l2_note and name.endswith("_above_l2"):
        note += "; " + l2_note
    return line + "  (%s)" % note


def assumed_l2_note(report):
    """What the figures above L2 say where fluidk's detection assumed the sizes (no CPUID cache
    leaf, cache folder or AMD legacy leaf gave them) and its L2 was used; else nothing."""
    context = report.get("context", {})
    l2 = str(context.get("fluidk_l2_bytes", ""))
    if context.get("fluidk_caches_from") == "assumed" and l2.isdigit() and int(l2) > 0:
        return "L2 assumed, %s: the machine gave no cache sizes" % size_name(int(l2))
    return ""


def size_name(size):
    return "%.4g MiB" % (size / 2**20) if size >= 1 << 20 else "%.4g KiB" % (size / 2**10)


def ratios(bps, l2):
    """[(RATIO name, value, the size it was smallest at)] in a fixed order."""
    sizes = sorted({k[2] for k in bps})
    above = [s for s in sizes if l2 is not None and s > l2]
    out = []

    def smallest(name, figure, mine, ref, threads, over):
        values = [(bps[(figure, mine, s, threads)] / bps[(figure, ref, s, threads if ref != "memcpy" else 1)], s)
                  for s in over
                  if (figure, mine, s, threads) in bps and (figure, ref, s, threads if ref != "memcpy" else 1) in bps]
        if values:
            value, size = min(values)
            out.append((name, value, size))

    for figure in FIGURES:
        smallest("transform.%s.vs_onednn.min_over_sizes" % figure, figure, "fluidk", "onednn", 1, sizes)
        smallest("transform.%s.vs_onednn.t2.min_over_sizes" % figure, figure, "fluidk", "onednn", 2, sizes)
        smallest("transform.%s.vs_memcpy.min_over_sizes_above_l2" % figure, figure, "fluidk", "memcpy", 1, above)
    smallest("transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2",
             "fused_nChw8c_f32_to_nchw_f16", "fluidk", "sequential", 1, above)
    return out


def shape_bytes(shape):
    """Bytes of the float tensor of a shape's name, NxCxHxW."""
    n, c, h, w = (int(x) for x in shape.split("x"))
    return 4 * n * c * h * w


def shape_name(shape):
    return "%s (%s)" % (shape, size_name(shape_bytes(shape)))


def network_ratios(bps):
    """[(RATIO name, value, the shape it was smallest at)]: fluidk over each reference measured at
    the network shapes (oneDNN, memcpy, the sequential steps), one thread."""
    out = []
    for figure in FIGURES:
        for ref in ("onednn", "memcpy", "sequential"):
            values = [(bps[(figure, "fluidk", s, 1)] / bps[(figure, ref, s, 1)], s)
                      for s in {k[2] for k in bps if k[0] == figure}
                      if (figure, "fluidk", s, 1) in bps and (figure, ref, s, 1) in bps]
            if values:
                value, shape = min(values)
                out.append(("transform.%s.vs_%s.min_over_network_shapes" % (figure, ref), value, shape))
    return out


def tables(bps, markdown, network=False):
    """One table per figure: GB/s of each implementation and thread count, a row per size (per
    shape, for the network shapes)."""
    label = shape_name if network else size_name
    lines = []
    for figure in FIGURES:
        columns = sorted({(k[1], k[3]) for k in bps if k[0] == figure},
                         key=lambda c: (["fluidk", "onednn", "sequential", "memcpy"].index(c[0])
                                        if c[0] in ("fluidk", "onednn", "sequential", "memcpy") else 9, c[1]))
        if not columns:
            continue
        sizes = sorted({k[2] for k in bps if k[0] == figure}, key=shape_bytes if network else None)
        heads = ["%s t%d" % c for c in columns]
        title = figure + (" at a network's shapes" if network else "")
        width = max(len(label(s)) for s in sizes) + 2
        if markdown:
            lines.append("**%s** (GB/s, read + written)" % title)
            lines.append("")
            lines.append("| %s | " % ("shape" if network else "size") + " | ".join(heads) + " |")
            lines.append("|---:|" + "---:|" * len(heads))
        else:
            lines.append("%s (GB/s, read + written)" % title)
            lines.append("%-*s" % (width, "shape" if network else "size") + "".join("%14s" % h for h in heads))
        for s in sizes:
            cells = ["%.2f" % (bps[(figure, c[0], s, c[1])] / 1e9) if (figure, c[0], s, c[1]) in bps else "-"
                     for c in columns]
            if markdown:
                lines.append("| %s | " % label(s) + " | ".join(cells) + " |")
            else:
                lines.append("%-*s" % (width, label(s)) + "".join("%14s" % c for c in cells))
        lines.append("")
    return lines


def network_medians(report):
    """{(model, batch, threads, side): {figure: the median over the rounds}}, and the memory of
    each side at batch 1 and one thread per model: {(model, side): MiB}, peak minus start (the
    median over the rounds), absent where a round lacks either figure."""
    values = {}
    growth = {}
    for r in report["runs"]:
        key = (r["model"], r["batch"], r["threads"], r["side"])
        for figure in ("median_ms", "overhead_percent"):
            if figure in r:
                values.setdefault(key, {}).setdefault(figure, []).append(r[figure])
        if r["batch"] == 1 and r["threads"] == 1:
            both = "peak_rss_kb" in r and "start_rss_kb" in r
            growth.setdefault((r["model"], r["side"]), []).append(
                (r["peak_rss_kb"] - r["start_rss_kb"]) / 1024 if both else None)
    medians = {key: {figure: statistics.median(v) for figure, v in figures.items()}
               for key, figures in values.items()}
    memory = {key: statistics.median(v) for key, v in growth.items() if None not in v}
    return medians, memory


def network_lines(report, markdown):
    """The network benchmark's tables, then its RATIO and VALUE lines."""
    medians, memory = network_medians(report)
    missing = report.get("missing", {})
    models, batches, threads = report["models"], report["batches"], report["threads"]

    def why(side, figures):
        reasons = [missing.get("%s.%s" % (side, f)) for f in figures]
        reasons = [r for r in reasons if r]
        return "; ".join(reasons) if reasons else "not measured"

    def table(head, rows):
        if markdown:
            return (["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
                    + ["| " + " | ".join(row) + " |" for row in rows] + [""])
        widths = [max(len(x) for x in column) + 2 for column in zip(head, *rows)]
        return ["".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                for row in [head] + rows] + [""]

    time_rows, memory_rows, ratio_lines, value_lines = [], [], [], []
    for model in models:
        for batch in batches:
            for t in threads:
                name = "network.%s.b%d.t%d" % (model, batch, t)
                mine = medians.get((model, batch, t, "fluidk"), {}).get("median_ms")
                ref = medians.get((model, batch, t, "onnxruntime"), {}).get("median_ms")
                ratio = ref / mine if mine and ref else None
                time_rows.append([model, str(batch), str(t), "%.2f" % mine if mine else "-",
                                  "%.2f" % ref if ref else "-", "%.3f" % ratio if ratio else "-"])
                if ratio is None:
                    ratio_lines.append("RATIO %s.vs_onnxruntime missing  (not measured)" % name)
                else:
                    ratio_lines.append("RATIO %s.vs_onnxruntime %.3f" % (name, ratio))
                for side, value in (("fluidk", mine), ("onnxruntime", ref)):
                    if value is not None:
                        value_lines.append("VALUE %s.%s_ms %.3f" % (name, side, value))
        name = "network.%s.b1" % model
        mine, ref = memory.get((model, "fluidk")), memory.get((model, "onnxruntime"))
        memory_rows.append([model, "%.1f" % mine if mine is not None else "missing",
                            "%.1f" % ref if ref is not None else "missing",
                            "%.3f" % (mine / ref) if mine is not None and ref else "-"])
        if mine is not None and ref:
            ratio_lines.append("RATIO %s.memory.vs_onnxruntime %.3f" % (name, mine / ref))
        else:
            reasons = [why(side, ("peak_rss_kb", "start_rss_kb"))
                       for side, v in (("fluidk", mine), ("onnxruntime", ref)) if v is None]
            ratio_lines.append("RATIO %s.memory.vs_onnxruntime missing  (%s)" % (
                name, "; ".join(reasons) or "ONNX Runtime's memory did not grow"))
        for side, value in (("fluidk", mine), ("onnxruntime", ref)):
            if value is None:
                value_lines.append("VALUE %s.%s_memory_mib missing  (%s)" % (
                    name, side, why(side, ("peak_rss_kb", "start_rss_kb"))))
            else:
                value_lines.append("VALUE %s.%s_memory_mib %.1f" % (name, side, value))
        overhead = medians.get((model, 1, 1, "fluidk"), {}).get("overhead_percent")
        if overhead is None:
            value_lines.append("VALUE network.%s.overhead_percent missing  (%s)" % (
                model, why("fluidk", ("overhead_percent",))))
        else:
            value_lines.append("VALUE network.%s.overhead_percent %.2f" % (model, overhead))

    blank = [""] if markdown else []
    lines = ["network: median ms of a run (ONNX Runtime's over fluidk's: > 1 when fluidk is faster)"] + blank
    lines += table(["model", "batch", "threads", "fluidk ms", "ONNX Runtime ms", "ratio"], time_rows)
    lines.append("network: memory at batch 1, one thread, MiB (peak RSS minus the RSS before the model; "
                 "fluidk's over ONNX Runtime's: the goal is <= 1.2)")
    lines += blank + table(["model", "fluidk MiB", "ONNX Runtime MiB", "ratio"], memory_rows)
    if "checked" in report:
        lines.append("outputs checked: " + report["checked"])
    return lines + ratio_lines + value_lines


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown = "--markdown" in sys.argv
    if "--network" in sys.argv:
        if len(args) != 1:
            sys.exit("usage: ratios.py --network <bench/network.py JSON output> [--markdown]")
        lines = network_lines(read(args[0]), markdown)
        print("\n".join(lines))
        sys.exit(1 if any(" missing " in line for line in lines if line.startswith("RATIO network.")
                          and ".memory." not in line) else 0)
    if len(args) != 1:
        sys.exit("usage: ratios.py <transforms_bench JSON output> [--markdown]")
    report = read(args[0])
    bps, l2 = load(args[0], report=report)
    network, _ = load(args[0], network=True, report=report)
    if not bps and not network:
        sys.exit("ratios.py: no medians in %s (run with --benchmark_repetitions > 1)" % args[0])
    print("\n".join(tables(bps, markdown) + tables(network, markdown, network=True)))
    found = ratios(bps, l2)
    implementations = onednn_implementations(report)
    l2_note = assumed_l2_note(report)
    for name, value, size in found:
        print(ratio_line(name, value, size, size_name(size), implementations, markdown, l2_note))
    if bps and l2 is None:
        # Never dropped silently: each figure above L2 that was measured is printed as missing.
        measured = {(k[0], k[1]) for k in bps}
        names = ["transform.%s.vs_memcpy.min_over_sizes_above_l2" % f for f in FIGURES
                 if (f, "fluidk") in measured and (f, "memcpy") in measured]
        if {("fused_nChw8c_f32_to_nchw_f16", "fluidk"), ("fused_nChw8c_f32_to_nchw_f16", "sequential")} <= measured:
            names.append("transform.fused_nChw8c_f32_to_nchw_f16.vs_sequential.min_over_sizes_above_l2")
        for name in names:
            print("RATIO %s missing  (no L2 size: neither fluidk's detection nor the benchmark's context "
                  "gave one)" % name)
    found_network = network_ratios(network)
    implementations = onednn_implementations(report, network=True)
    for name, value, shape in found_network:
        print(ratio_line(name, value, shape, shape, implementations, markdown))
    sys.exit(0 if found or found_network else 1)


if __name__ == "__main__":
    main()
