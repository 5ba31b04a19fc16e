#!/usr/bin/env python3
"""The network benchmark: fluidk's run-onnx against ONNX Runtime's CPU library (from node) on
ResNet-18, MobileNetV2 and SqueezeNet 1.1 at 224x224, batch 1 and 8, one and two threads.

Makes the models and their inputs (scripts/onnx/make_models.py, with /usr/bin/python3) and ONNX
Runtime's outputs for them (scripts/onnx/reference.js) into MODELS_DIR/b<batch>/<model>, again
only when those scripts changed. Then, in each of several rounds, for every model, batch and
thread count, one run-onnx process and one scripts/onnx/bench_ort.js process, one after the
other, the side that goes first alternating from round to round, so that the machine's noise
falls on both alike. Each process makes its first run and 2 warm-up runs untimed, then
--repeat timed runs, and prints their median. Every run-onnx process also compares its outputs
with ONNX Runtime's (--expect): a wrong answer stops the benchmark rather than giving a figure.

Writes what each process printed, as JSON, for `ratios.py --network` (the RATIO and VALUE lines)
and `plots.py --network` (the chart). A figure that run-onnx does not print (peak_rss_kb,
start_rss_kb, overhead_percent) is recorded as missing, with the reason.

Usage: network.py --run-onnx EXE --models-dir DIR --out JSON [--rounds R] [--repeat N]
                  [--ort DIR] [--only MODEL]...
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKE_MODELS = os.path.join(ROOT, "scripts", "onnx", "make_models.py")
REFERENCE = os.path.join(ROOT, "scripts", "onnx", "reference.js")
BENCH_ORT = os.path.join(ROOT, "scripts", "onnx", "bench_ort.js")
MODELS = ["resnet18", "mobilenetv2", "squeezenet11"]
BATCHES = [1, 8]
THREADS = [1, 2]
# run-onnx --expect's tolerances, as the ONNX tests use them (test/onnx/onnx_test.py): SqueezeNet's
# outputs are probabilities of about 1e-3, which an absolute 1e-5 would barely check.
RTOL = 1e-4
ATOL = {"squeezenet11": 1e-7}
DEFAULT_ATOL = 1e-5
# The figures each process prints, one "name value" line each.
FIGURES = ["median_ms", "peak_rss_kb", "start_rss_kb", "overhead_percent"]


def log(message):
    print("network.py: " + message, file=sys.stderr, flush=True)


def model_dir(models_dir, model, batch):
    return os.path.join(models_dir, "b%d" % batch, model)


def prepare(models_dir, ort_dir, models):
    """Makes the models, their inputs and ONNX Runtime's outputs, unless a stamp newer than the
    scripts that make them says they are made."""
    stamp = os.path.join(models_dir, "models.stamp")
    wanted = " ".join(models)
    newest = max(os.path.getmtime(p) for p in (MAKE_MODELS, REFERENCE, __file__))
    if os.path.exists(stamp) and os.path.getmtime(stamp) > newest:
        with open(stamp) as f:
            if f.read().strip() == wanted:
                return
    for batch in BATCHES:
        directory = os.path.join(models_dir, "b%d" % batch)
        log("making the models at batch %d into %s" % (batch, directory))
        subprocess.run(["/usr/bin/python3", MAKE_MODELS, "--batch", str(batch), directory, *models], check=True,
                       stdout=sys.stderr)
        subprocess.run(["node", REFERENCE, "--ort", ort_dir, *(os.path.join(directory, m) for m in models)],
                       check=True, stdout=sys.stderr)
    with open(stamp, "w") as f:
        f.write(wanted + "\n")


def figures(text):
    """{name: value} of the figure lines a process printed."""
    out = {}
    for name in FIGURES:
        m = re.search(r"^%s (\S+)$" % name, text, re.MULTILINE)
        if m:
            out[name] = float(m.group(1))
    return out


def run(command, what):
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        sys.exit("network.py: %s failed (status %d): %s" % (what, result.returncode, " ".join(command)))
    return result.stdout, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-onnx", required=True)
    parser.add_argument("--models-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ort", default=os.path.join(ROOT, ".deps", "onnxruntime"))
    parser.add_argument("--only", action="append", choices=MODELS, help="these models only (repeatable)")
    args = parser.parse_args()
    if args.rounds < 1 or args.repeat < 1:
        parser.error("--rounds and --repeat take positive integers")
    models = args.only or MODELS
    prepare(args.models_dir, args.ort, models)

    runs, missing = [], {}
    for round_ in range(args.rounds):
        log("round %d of %d" % (round_ + 1, args.rounds))
        for model in models:
            for batch in BATCHES:
                directory = model_dir(args.models_dir, model, batch)
                for threads in THREADS:
                    sides = {
                        "fluidk": [args.run_onnx, os.path.join(directory, "model.onnx"), "--library", "onednn",
                                   "--threads", str(threads), "--repeat", str(args.repeat),
                                   "--expect", os.path.join(directory, "test_data_set_0"),
                                   "--rtol", str(RTOL), "--atol", str(ATOL.get(model, DEFAULT_ATOL))],
                        "onnxruntime": ["node", BENCH_ORT, "--ort", args.ort, "--threads", str(threads),
                                        "--repeat", str(args.repeat), directory],
                    }
                    order = ["fluidk", "onnxruntime"] if round_ % 2 == 0 else ["onnxruntime", "fluidk"]
                    for side in order:
                        what = "%s b%d t%d, %s" % (model, batch, threads, side)
                        text, seconds = run(sides[side], what)
                        found = figures(text)
                        if "median_ms" not in found:
                            sys.exit("network.py: %s printed no median_ms:\n%s" % (what, text))
                        for name in FIGURES:
                            if name not in found:
                                missing.setdefault("%s.%s" % (side, name), "%s printed no %s line" % (
                                    "run-onnx" if side == "fluidk" else "bench_ort.js", name))
                        runs.append({"model": model, "batch": batch, "threads": threads, "side": side,
                                     "round": round_, **found})
                        log("%s: %.2f ms (%.0f s)" % (what, found["median_ms"], seconds))
    report = {"models": models, "batches": BATCHES, "threads": THREADS, "rounds": args.rounds,
              "repeat": args.repeat, "checked": "every run-onnx process, --expect against ONNX Runtime's "
              "outputs (rtol %g, atol %g; %g for squeezenet11)" % (RTOL, DEFAULT_ATOL, ATOL["squeezenet11"]),
              "runs": runs, "missing": missing}
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    log("wrote " + args.out)


if __name__ == "__main__":
    main()
