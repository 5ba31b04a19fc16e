#!/usr/bin/env python3
"""Draws transforms_bench's medians: one PNG per figure, throughput (GB/s, bytes read plus
written) against the size of the float tensor, one line per implementation and thread count.
With --network, the network benchmark's instead (bench/network.py's JSON): network.png, the
median time of a run of each model, batch and thread count, fluidk's bar beside ONNX Runtime's
(a log scale: they differ by orders of magnitude), each pair labelled with ONNX Runtime's time
over fluidk's (the RATIO line; > 1 when fluidk is faster).
Usage: plots.py <transforms_bench JSON> <output directory> [title suffix, e.g. the CPU model]
       plots.py --network <network JSON> <output directory> [title suffix]
Needs matplotlib (Debian's python3-matplotlib, which scripts/deps installs)."""
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import FIGURES, load, network_medians, read, size_name  # noqa: E402

STYLE = {"fluidk": ("tab:blue", "o"), "onednn": ("tab:orange", "s"), "sequential": ("tab:green", "^"),
         "memcpy": ("tab:gray", "x"), "onnxruntime": ("tab:red", "D")}


def network_chart(path, out_dir, suffix):
    report = read(path)
    medians, _ = network_medians(report)
    models, configurations = report["models"], [(b, t) for b in report["batches"] for t in report["threads"]]
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 4.2), dpi=100, sharey=True, squeeze=False)
    for ax, model in zip(axes[0], models):
        for i, (batch, threads) in enumerate(configurations):
            times = [medians.get((model, batch, threads, side), {}).get("median_ms")
                     for side in ("fluidk", "onnxruntime")]
            for offset, side, value in ((-0.2, "fluidk", times[0]), (0.2, "onnxruntime", times[1])):
                if value:
                    ax.bar(i + offset, value, width=0.4, color=STYLE[side][0],
                           label=("fluidk (oneDNN)" if side == "fluidk" else "ONNX Runtime") if i == 0 else None)
            if all(times):
                ax.text(i, max(times) * 1.15, "%.2gx" % (times[1] / times[0]), ha="center", fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(range(len(configurations)))
        ax.set_xticklabels(["b%d t%d" % c for c in configurations], fontsize=8)
        ax.set_title(model, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("median ms per run (log)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Networks, batch b, threads t; above each pair: ONNX Runtime's time over fluidk's"
                 + ("\n" + suffix if suffix else ""), fontsize=9)
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "network.png")
    fig.savefig(out)
    plt.close(fig)
    print(out)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--network":
        if len(sys.argv) < 4:
            sys.exit("usage: plots.py --network <network JSON> <output directory> [title suffix]")
        network_chart(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "")
        return
    if len(sys.argv) < 3:
        sys.exit("usage: plots.py <transforms_bench JSON> <output directory> [title suffix]")
    bps, l2 = load(sys.argv[1])
    out_dir = sys.argv[2]
    suffix = sys.argv[3] if len(sys.argv) > 3 else ""
    os.makedirs(out_dir, exist_ok=True)
    for figure in FIGURES:
        series = sorted({(k[1], k[3]) for k in bps if k[0] == figure})
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
        for impl, threads in series:
            sizes = sorted(k[2] for k in bps if k[0] == figure and k[1] == impl and k[3] == threads)
            color, marker = STYLE.get(impl, ("black", "."))
            ax.plot(sizes, [bps[(figure, impl, s, threads)] / 1e9 for s in sizes], color=color, marker=marker,
                    linestyle="-" if threads == 1 else "--", label="%s, %d thread%s" % (impl, threads,
                                                                                    "" if threads == 1 else "s"))
        if l2:
            ax.axvline(l2, color="lightgray", linewidth=1)
            ax.text(l2, ax.get_ylim()[1] * 0.97, " L2", color="gray", va="top", fontsize=8)
        ax.set_xscale("log", base=2)
        sizes = sorted({k[2] for k in bps if k[0] == figure})
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_name(s).replace(" ", "\u00a0") for s in sizes], fontsize=8)
        ax.set_xlabel("size of the float tensor")
        ax.set_ylabel("GB/s (read + written)")
        ax.set_title(figure + (" \u2014 " + suffix if suffix else ""), fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = os.path.join(out_dir, figure + ".png")
        fig.savefig(path)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
