#!/usr/bin/python3
"""The ONNX tests: whole models run through fluidk (build/examples/onnx/run_onnx) and compared
with ONNX Runtime; ONNX's own backend node tests; and the models and inputs that run-onnx must
refuse. Run by Meson (test/onnx/meson.build, suite 'onnx'), with Debian's /usr/bin/python3,
which has the onnx and numpy modules (scripts/deps).

  onnx_test.py prepare --models DIR --stamp FILE [--ort DIR] [--node NODE]
      builds the networks (scripts/onnx/make_models.py) into DIR, runs ONNX Runtime on them
      (scripts/onnx/reference.js) for their expected outputs, and checks ONNX Runtime against
      the float64 values that make_models.py computed while it built them.
  onnx_test.py models --run-onnx BIN --models DIR FAMILY
      runs each network with run-onnx on FAMILY (cpu, onednn, opencl, or mixed: MobileNetV2 on
      OpenCL with its Gemm on the CPU), with --expect and --plan, and checks the outputs again
      here and the plan's places and libraries.
  onnx_test.py node --run-onnx BIN --node-tests DIR FAMILY
      runs every node test of DIR whose op types the importer maps, on FAMILY (cpu, onednn,
      opencl), against its expected outputs; a refusal passes only when the model has a
      feature the importer documents as refused, and the message names it. The node tests of
      control flow (If, Loop) named in NODE_TESTS_EXPECTED must be among them, and pass or be
      refused as listed there.
  onnx_test.py control_flow --run-onnx BIN FAMILY
      If and Loop models built here (nested: an If and a Loop in a Loop's body, an If in a
      branch; names repeated in sibling subgraphs; bodies and branches reading outer values;
      trip counts, conditions and both) against numpy, on FAMILY (cpu, onednn, opencl), and
      the Loop and If models the importer must refuse.
  onnx_test.py refusals --run-onnx BIN --models DIR
      models and inputs that must be refused: exit 2, a message naming the node, op type,
      attribute, input or file, and nothing run; and --expect's own comparison (infinities,
      int64 beyond a double's 53 bits).
  onnx_test.py fusion --run-onnx BIN --models DIR FAMILY...
      the fuse passes (examples/onnx/fuse_passes.hpp): small models that hold every pattern
      (a batch_norm with mean != 0, var != 1 and its own epsilon; Gemm + Relu, Clip, Sigmoid)
      against numpy in float64, with the passes on and off, on each FAMILY (cpu, onednn,
      opencl), and an activation at another op_device left apart; the networks with every pass off, and ResNet-18 on oneDNN with each pass off
      in turn; the fusions --plan reports; --no-fuse of an unknown pass.

Tolerance: |actual - expected| <= atol + rtol |expected|, rtol 1e-4, atol 1e-5 (issue 50);
atol 1e-7 for SqueezeNet's probabilities, which are about 1e-3 each (1e-5 would let through an
error of 1% in them).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RTOL, ATOL = 1e-4, 1e-5
MODEL_ATOL = {"squeezenet11": 1e-7}
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts", "onnx")

# What run-onnx is given for each family of kernels.
FAMILIES = {
    "cpu": ["--place", "cpu"],
    "onednn": ["--library", "onednn"],
    # The layout of oneDNN's convolutions as given, against what auto chooses for each network.
    "onednn_nhwc": ["--library", "onednn", "--onednn-layout", "NHWC"],
    "onednn_blocked": ["--library", "onednn", "--onednn-layout", "blocked"],
    "opencl": ["--place", "opencl:0"],
    "mixed": ["--place", "opencl:0", "--op-device", "Gemm=cpu"],
}
MODELS = ["resnet18", "mobilenetv2", "squeezenet11", "cifar"]
FAMILY_MODELS = {"mixed": ["mobilenetv2"]}

# The ONNX op types the importer maps (the contract of issue 50), and those of control flow and of
# the node tests' loop bodies (If, Loop and what their bodies use).
SUPPORTED = {
    "Conv", "BatchNormalization", "Relu", "Clip", "Sigmoid", "Add", "Mul", "MaxPool", "AveragePool",
    "GlobalAveragePool", "Flatten", "Reshape", "Gemm", "MatMul", "Softmax", "Concat", "Dropout", "Identity",
} | {
    "If", "Loop", "Sub", "Div", "Cast", "Ceil", "Unsqueeze", "Slice", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "Equal", "And", "Or", "Xor", "Not",
}
# Node tests that must be among those run, with what must come of them: "pass", or "refuse"
# (each with a feature that documented_refusals finds: a sequence or an optional).
NODE_TESTS_EXPECTED = {
    "test_if": "pass",
    "test_loop11": "pass",
    "test_range_float_type_positive_delta_expanded": "pass",
    "test_range_int32_type_negative_delta_expanded": "pass",
    "test_if_seq": "refuse",
    "test_loop13_seq": "refuse",
    "test_if_opt": "refuse",
    "test_loop16_seq_none": "refuse",
}
# The fluidk operators that have no oneDNN kernel: the library fallback runs their CPU plain
# kernel (pure shape and copy operators).
PLAIN_UNDER_ONEDNN = {"flatten2", "reshape2", "dropout", "assign"}

failures = []


def fail(message):
    failures.append(message)
    print(f"FAILED: {message}")


def run(command, timeout=300):
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout,
                                check=False)
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else err.stdout or ""
        result = subprocess.CompletedProcess(command, -9, out, f"timed out after {timeout} s")
    result.seconds = time.monotonic() - started
    return result


def status_text(rc):
    return f"signal {-rc}" if rc < 0 else f"status {rc}"


def load_tensor(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


def compare(actual, expected, atol=ATOL):
    """None when close by the tests' rule, else what differs."""
    if actual.dtype != expected.dtype:
        return f"data type {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.dtype.kind in "fc":
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        bad = ~((np.abs(a - e) <= atol + RTOL * np.abs(e)) | (a == e) | (np.isnan(a) & np.isnan(e)))
    else:
        bad = actual != expected
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return f"{int(bad.sum())} of {bad.size} values differ, first at {list(i)}: {actual[i]} against {expected[i]}"
    return None


def check_outputs(label, result, out_dir, expected_dir, count, atol=ATOL):
    """run-onnx's --expect lines and its written outputs, compared here as well."""
    lines = [l for l in result.stdout.splitlines() if re.match(r"output \d+ ", l)]
    ok = True
    if len(lines) != count:
        fail(f"{label}: {len(lines)} 'output K' lines for {count} outputs")
        ok = False
    for line in lines:
        if not line.endswith(" ok"):
            fail(f"{label}: {line}")
            ok = False
    for k in range(count):
        written = os.path.join(out_dir, f"output_{k}.pb")
        if not os.path.exists(written):
            fail(f"{label}: run-onnx wrote no output_{k}.pb")
            ok = False
            continue
        diff = compare(load_tensor(written), load_tensor(os.path.join(expected_dir, f"output_{k}.pb")), atol)
        if diff:
            fail(f"{label}: output {k} against the reference (checked here): {diff}")
            ok = False
    return ok


# ---------------------------------------------------------------------------------------------
# prepare

def prepare(args):
    started = time.monotonic()
    python = sys.executable
    for command in ([python, os.path.join(SCRIPTS, "make_models.py"), args.models] + MODELS,
                    [args.node, os.path.join(SCRIPTS, "reference.js")]
                    + (["--ort", args.ort] if args.ort else []) + [os.path.join(args.models, m) for m in MODELS]):
        result = run(command)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        if result.returncode != 0:
            print(f"onnx_test.py prepare: {' '.join(command[:2])}: {status_text(result.returncode)}", file=sys.stderr)
            return 1
    # ONNX Runtime against make_models.py's float64 values: each within half the tests'
    # tolerance, so that the nets are well enough conditioned for a second float32
    # implementation (fluidk) to meet the tolerance against ONNX Runtime.
    for model in MODELS:
        directory = os.path.join(args.models, model)
        k = 0
        while os.path.exists(os.path.join(directory, f"numpy_output_{k}.npy")):
            exact = np.load(os.path.join(directory, f"numpy_output_{k}.npy"))
            ort = load_tensor(os.path.join(directory, "test_data_set_0", f"output_{k}.pb")).astype(np.float64)
            atol = MODEL_ATOL.get(model, ATOL)
            ratio = (np.abs(ort - exact) / (atol + RTOL * np.abs(exact))).max() if ort.shape == exact.shape else np.inf
            print(f"{model}: output {k}: ONNX Runtime's error against float64 is {ratio:.3f} of the tolerance")
            if not ratio <= 0.5:
                print(f"onnx_test.py prepare: {model}: ONNX Runtime and the float64 values of make_models.py differ "
                      f"by {ratio:.3f} of the tolerance (more than half)", file=sys.stderr)
                return 1
            k += 1
    with open(args.stamp, "w", encoding="utf-8") as f:
        f.write("models and ONNX Runtime's outputs made\n")
    print(f"prepared in {time.monotonic() - started:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# models

PLAN_ROW = re.compile(r"^\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+) (\S+) (\S+)( \(fallback\))?")


def plan_rows(stdout):
    """(operator, place, library, fell back, [lines of its moved inputs]) per row of run-onnx's
    plan table."""
    rows, inside = [], False
    for line in stdout.splitlines():
        if line.startswith("plan of the first run"):
            inside = True
            continue
        if inside:
            if re.match(r"^\s+#\s+operator", line):
                continue
            m = PLAN_ROW.match(line)
            if m:
                rows.append((m.group(2), m.group(3), m.group(6), bool(m.group(7)), []))
            elif line.startswith("       ") and rows:  # a moved input, indented further
                rows[-1][4].append(line.strip())
            else:
                inside = False
    return rows


CONV_LAYOUTS = {"NHWC": {"NCHW", "NHWC"}, "blocked": {"NCHW", "nChw8c", "nChw16c"}}


def check_conv_layout(label, family, stdout):
    """The layout run-onnx says it chose for oneDNN's convolutions (the one given, for the
    onednn_* families), and the conv2d kernels of the plan in it: the first one's NCHW input
    taken as it is, the others in the layout it gave. Where auto chose the layout, no operator
    between the convolutions takes it back to NCHW (only the first conv2d runs as NCHW); where
    it was given, one may (SqueezeNet's dropout, whose plain kernel writes NCHW), but a later
    conv2d still runs in the layout given."""
    chosen = re.search(r"^onednn_layout (\S+) \((.*)\)$", stdout, re.M)
    if not chosen:
        fail(f"{label}: --plan printed no 'onednn_layout' line")
        return
    layout, why = chosen.groups()
    given = {"onednn_nhwc": "NHWC", "onednn_blocked": "blocked"}.get(family)
    if given and (layout, why) != (given, "given"):
        fail(f"{label}: onednn_layout {layout} ({why}), where --onednn-layout {given} was given")
    if layout not in CONV_LAYOUTS:
        fail(f"{label}: onednn_layout {layout}: neither NHWC nor blocked")
        return
    convs = [m.group(1) for m in re.finditer(r"^\s+\d+\s+conv2d\s+\S+\s+\S+ (\S+) ONEDNN", stdout, re.M)]
    wrong = sorted(set(convs) - CONV_LAYOUTS[layout])
    nchw = convs.count("NCHW")
    if wrong or nchw == 0 or (why.startswith("auto") and nchw > 1) or (len(convs) > 1 and nchw == len(convs)):
        fail(f"{label}: onednn_layout {layout} ({why}), but the conv2d kernels ran in {convs}")
    print(f"  onednn_layout {layout} ({why}): {len(convs)} conv2d kernels in {', '.join(sorted(set(convs)))}")


def check_plan(label, family, stdout):
    rows = plan_rows(stdout)
    if not rows:
        fail(f"{label}: --plan printed no plan table")
        return
    for op, where, library, fell_back, _ in rows:
        if family == "cpu":
            wanted = ("cpu", "PLAIN")
        elif family.startswith("onednn"):
            wanted = ("cpu", "PLAIN" if op in PLAIN_UNDER_ONEDNN else "ONEDNN")
        elif family == "opencl":
            wanted = ("opencl:0", "PLAIN")
        else:  # mixed: the Gemm on the CPU, the rest on OpenCL
            wanted = ("cpu", "PLAIN") if op == "gemm" else ("opencl:0", "PLAIN")
        if (where, library) != wanted:
            fail(f"{label}: plan: {op} ran on {where} with {library}, expected {wanted[0]} with {wanted[1]}")
        if family.startswith("onednn") and op in PLAIN_UNDER_ONEDNN and not fell_back:
            fail(f"{label}: plan: {op} ran its plain kernel under use_onednn without the '(fallback)' mark")
    if family.startswith("onednn"):
        check_conv_layout(label, family, stdout)
        plain = sorted({row[0] for row in rows if row[2] == "PLAIN"})
        onednn = sorted({row[0] for row in rows if row[2] == "ONEDNN"})
        print(f"  plan: oneDNN kernels for {', '.join(onednn)}; "
              f"plain kernels (fallback) for {', '.join(plain) or 'none'}")
        listed = re.search(r"^fallbacks (\d+)", stdout, re.M)
        marked = sum(1 for row in rows if row[3])
        if not listed or int(listed.group(1)) != marked:
            fail(f"{label}: plan: 'fallbacks N' does not count the {marked} rows marked '(fallback)'")
    if family in ("opencl", "mixed"):
        # A later run copies the inputs again; the weights' copies of the first are the
        # transfer cache's.
        copies = re.search(r"^device copies per run (\d+) \(first run (\d+)\)", stdout, re.M)
        if not copies:
            fail(f"{label}: plan: no 'device copies per run N (first run M)' line")
        elif not 0 < int(copies.group(1)) < int(copies.group(2)):
            fail(f"{label}: plan: a later run made {copies.group(1)} device copies, the first "
                 f"{copies.group(2)}: expected the inputs' copies again and the weights' kept")
        # The buffers freed in a run serve the next (the devices' memory caches): the first
        # run's drivers made them, a later run's none.
        buffers = re.search(r"^device buffers made per run (\d+) \(first run (\d+)\)", stdout, re.M)
        if not buffers:
            fail(f"{label}: plan: no 'device buffers made per run N (first run M)' line")
        elif int(buffers.group(1)) != 0 or int(buffers.group(2)) == 0:
            fail(f"{label}: plan: the drivers made {buffers.group(1)} device buffers in a later run, "
                 f"{buffers.group(2)} in the first: expected the first run's buffers to serve the later")
    if family == "mixed":
        # The Gemm's input comes from OpenCL (the pool before it ran there).
        for op, _, _, _, moved in rows:
            if op == "gemm" and not any(re.search(r"opencl:0\s*->\s*cpu", line) for line in moved):
                fail(f"{label}: plan: gemm ran on the CPU, but no input of it was copied from opencl:0: {moved}")


def models(args):
    family = args.family
    names = FAMILY_MODELS.get(family, MODELS)
    with tempfile.TemporaryDirectory(prefix=f"onnx-{family}-") as scratch:
        for model in names:
            directory = os.path.join(args.models, model)
            data = os.path.join(directory, "test_data_set_0")
            count = len([f for f in os.listdir(data) if re.fullmatch(r"output_\d+\.pb", f)])
            inputs = sorted(f for f in os.listdir(data) if re.fullmatch(r"input_\d+\.pb", f))
            out = os.path.join(scratch, model)
            command = [args.run_onnx, os.path.join(directory, "model.onnx")]
            for f in inputs:
                command += ["--input", os.path.join(data, f)]
            atol = MODEL_ATOL.get(model, ATOL)
            command += ["--expect", data, "--output-dir", out, "--rtol", str(RTOL), "--atol", str(atol), "--plan"]
            command += FAMILIES[family]
            label = f"{model} ({family})"
            result = run(command)
            lines = [l for l in result.stdout.splitlines() if re.match(r"output \d+ ", l)]
            print(f"{label}: {status_text(result.returncode)} in {result.seconds:.1f} s")
            for line in lines:
                print(f"  {line}")
            if result.returncode != 0:
                fail(f"{label}: run-onnx exited with {status_text(result.returncode)}: "
                     f"{result.stderr.strip()[-2000:]}")
                if result.returncode != 1:
                    continue
            check_outputs(label, result, out, data, count, atol)
            check_plan(label, family, result.stdout)
            check_fusions(label, result.stdout, EXPECTED_FUSIONS[model])
    return report(f"models {family}")


# ---------------------------------------------------------------------------------------------
# node tests

def graph_value_types(model):
    types = {}
    for value in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        types[value.name] = value.type
    return types


def documented_refusals(model):
    """The features of a model that the importer documents as refused (docs/onnx.md, "What it
    maps"), found here in the model itself, each with the words its message must hold:
    [(reason, regex)]."""
    reasons = []
    initializers = {t.name for t in model.graph.initializer}
    constants = initializers | {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    types = graph_value_types(model)
    for value in list(model.graph.input) + list(model.graph.output):
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            reasons.append((f"{value.name} is not a tensor ({kind})", r"not a tensor"))
            continue
        elem = value.type.tensor_type.elem_type
        if elem not in (TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL):
            name = TensorProto.DataType.Name(elem)
            reasons.append((f"{value.name} is {name}", re.escape(name)))
    for node in model.graph.node:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        x = types.get(node.input[0]) if node.input else None
        rank = len(x.tensor_type.shape.dim) if x is not None and x.HasField("tensor_type") else None
        if node.op_type in ("MaxPool", "AveragePool", "GlobalAveragePool") and rank not in (None, 4):
            reasons.append((f"{node.op_type} on rank {rank} (pool2d is 2-D)", r"2-D|rank"))
        if node.op_type == "MaxPool" and len([o for o in node.output if o]) > 1:
            reasons.append(("MaxPool's Indices output", r"Indices"))
        if node.op_type == "BatchNormalization" and (attributes.get("training_mode") or len(node.output) > 1):
            reasons.append(("BatchNormalization in training mode", r"training_mode|output 1"))
        if node.op_type == "Clip":
            for bound in node.input[1:]:
                if bound and bound not in constants:
                    reasons.append((f"Clip's bound '{bound}' is not a constant", re.escape(f"'{bound}'")))
        if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] and node.input[2] not in constants:
            reasons.append((f"Dropout's training_mode '{node.input[2]}' is not a constant",
                            r"training_mode " + re.escape(f"'{node.input[2]}'")))
        if node.op_type == "Reshape" and attributes.get("allowzero"):
            reasons.append(("Reshape with allowzero 1", r"allowzero|empty"))
        # Slice's axes and steps, and Unsqueeze's axes (version 13), are read when the program is
        # made: given at run time, they are refused; so are steps other than 1.
        if node.op_type == "Slice" and len(node.input) > 3 and node.input[3] and node.input[3] not in constants:
            reasons.append((f"Slice's axes '{node.input[3]}' is not a constant", re.escape(f"axes '{node.input[3]}'")))
        if node.op_type == "Slice" and len(node.input) > 4 and node.input[4]:
            steps = constant_values(model, node.input[4])
            if steps is None or (steps != 1).any():
                reasons.append((f"Slice's steps '{node.input[4]}' are not constant 1s",
                                re.escape(f"steps '{node.input[4]}'")))
        if node.op_type == "Unsqueeze" and len(node.input) > 1 and node.input[1] not in constants:
            reasons.append((f"Unsqueeze's axes '{node.input[1]}' is not a constant", re.escape(f"axes '{node.input[1]}'")))
    return reasons


def constant_values(model, name):
    """The values of an initializer or Constant node's output, or None."""
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
    return None


def node_tests(args):
    family = args.family
    candidates = []
    for name in sorted(os.listdir(args.node_tests)):
        path = os.path.join(args.node_tests, name, "model.onnx")
        if not os.path.exists(path):
            continue
        model = onnx.load(path)
        op_types = {n.op_type for n in model.graph.node}
        if op_types and op_types <= SUPPORTED:
            candidates.append((name, model))
    passed, refused = 0, []
    outcomes = {}  # name: "pass", "refuse" or "fail"
    with tempfile.TemporaryDirectory(prefix=f"onnx-node-{family}-") as scratch:
        for name, model in candidates:
            directory = os.path.join(args.node_tests, name)
            data = os.path.join(directory, "test_data_set_0")
            inputs = sorted((f for f in os.listdir(data) if re.fullmatch(r"input_\d+\.pb", f)),
                            key=lambda f: int(f[6:-3]))
            count = len([f for f in os.listdir(data) if re.fullmatch(r"output_\d+\.pb", f)])
            out = os.path.join(scratch, name)
            command = [args.run_onnx, os.path.join(directory, "model.onnx")]
            for f in inputs:
                command += ["--input", os.path.join(data, f)]
            command += ["--expect", data, "--output-dir", out] + FAMILIES[family]
            result = run(command, timeout=120)
            label = f"{name} ({family})"
            if result.returncode == 2:
                message = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
                reasons = documented_refusals(model)
                matching = [why for why, words in reasons if re.search(words, message)]
                if matching:
                    refused.append((name, matching[0], message))
                    outcomes[name] = "refuse"
                elif reasons:
                    fail(f"{label}: refused, but the message does not name what the importer documents as refused "
                         f"({'; '.join(why for why, _ in reasons)}): {message}")
                else:
                    fail(f"{label}: refused, though it has nothing the importer documents as refused: {message}")
                continue
            if result.returncode not in (0, 1):
                fail(f"{label}: run-onnx exited with {status_text(result.returncode)}: "
                     f"{result.stderr.strip()[-1500:]}")
                continue
            if check_outputs(label, result, out, data, count) and result.returncode == 0:
                passed += 1
                outcomes[name] = "pass"
            elif result.returncode == 0:
                fail(f"{label}: run-onnx said it matched, the check here says not")
    for name, expected in NODE_TESTS_EXPECTED.items():
        if not os.path.exists(os.path.join(args.node_tests, name, "model.onnx")):
            fail(f"{name} ({family}): not in {args.node_tests}")
        elif name not in [c for c, _ in candidates]:
            fail(f"{name} ({family}): not run: its op types are not all in SUPPORTED")
        elif outcomes.get(name, "fail") != expected:
            fail(f"{name} ({family}): expected to {expected}, got {outcomes.get(name, 'a failure (above)')}")
    # Run: the node tests that ran (not refused); with the refused ones, every node test whose op
    # types the importer maps.
    print(f"node tests {family}: {len(candidates) - len(refused)} run, {passed} passed, {len(refused)} refused"
          + (f" (unsupported: {'; '.join(f'{n}: {why}' for n, why, _ in refused)})" if refused else ""))
    print(f"  of the {len(candidates)} node tests in {args.node_tests} whose op types are all mapped "
          f"({', '.join(sorted(SUPPORTED))})")
    for name, _, message in refused:
        print(f"  refused {name}: {message}")
    return report(f"node tests {family}")


# ---------------------------------------------------------------------------------------------
# refusals

def tiny_model(nodes, inputs, outputs, initializers=(), check=False, opset=13):
    """A one-node model; check: valid ONNX, which the importer refuses all the same."""
    graph = helper.make_graph(nodes, "refusal", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def refusals(args):
    cifar = os.path.join(args.models, "cifar")
    cifar_model = os.path.join(cifar, "model.onnx")
    cifar_input = os.path.join(cifar, "test_data_set_0", "input_0.pb")
    x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])

    def y(*dims):
        return helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))

    weight = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), name="w")

    with tempfile.TemporaryDirectory(prefix="onnx-refusals-") as scratch:
        def save_model(name, model):
            path = os.path.join(scratch, name + ".onnx")
            with open(path, "wb") as f:
                f.write(model.SerializeToString())
            return path

        def save_bytes(name, data):
            path = os.path.join(scratch, name)
            with open(path, "wb") as f:
                f.write(data)
            return path

        def save_tensor(name, array, tensor_name="input"):
            return save_bytes(name + ".pb", numpy_helper.from_array(array, name=tensor_name).SerializeToString())

        x_file = save_tensor("x", np.ones((1, 2, 5, 5), np.float32), "x")
        with open(cifar_model, "rb") as f:
            cifar_bytes = f.read()
        corrupt = bytearray(cifar_bytes)
        corrupt[:16] = b"\xff" * 16
        rng = np.random.RandomState(0)
        # Dims [1, 1, 1, 2^36] and a single value: the checker takes it, and only shape
        # inference reads the dims.
        big_constant = TensorProto()
        big_constant.data_type = TensorProto.FLOAT
        big_constant.dims.extend([1, 1, 1, 2**36])
        big_constant.float_data.append(1.0)
        wide_constant = TensorProto()  # dims [2^30, 2^30, 8], whose product wraps to INT64_MIN
        wide_constant.data_type = TensorProto.FLOAT
        wide_constant.dims.extend([2**30, 2**30, 8])
        wide_constant.float_data.append(1.0)

        cases = [
            ("an unsupported operator",
             save_model("tanh", tiny_model([helper.make_node("Tanh", ["x"], ["y"], name="squash")],
                                           [x4], [y(1, 2, 5, 5)])),
             [x_file], [r"'squash'", r"Tanh", r"not supported"]),
            ("an unknown attribute",
             save_model("relu_alpha", tiny_model([helper.make_node("Relu", ["x"], ["y"], name="act", alpha=0.5)],
                                                 [x4], [y(1, 2, 5, 5)])),
             [x_file], [r"'act'", r"Relu", r"alpha"]),
            ("an attribute value the importer does not map (MaxPool storage_order 1)",
             save_model("maxpool_storage_order", tiny_model(
                 [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], storage_order=1)],
                 [x4], [y(1, 2, 4, 4)], check=True)),
             [x_file], [r"'pool'", r"MaxPool", r"storage_order"]),
            ("a Conv whose group does not divide W's output channels",
             save_model("conv_group_m", tiny_model(
                 [helper.make_node("Conv", ["x", "w3"], ["y"], name="conv", group=2)], [x4], [y(1, 3, 3, 3)],
                 [numpy_helper.from_array(np.ones((3, 1, 3, 3), np.float32), name="w3")])),
             [x_file], [r"'conv'", r"Conv", r"3 output channels, which group \(2\) does not divide"]),
            ("a Conv whose W does not take X's channels",
             save_model("conv_channels", tiny_model(
                 [helper.make_node("Conv", ["x", "w3"], ["y"], name="conv")], [x4], [y(1, 3, 3, 3)],
                 [numpy_helper.from_array(np.ones((3, 3, 3, 3), np.float32), name="w3")])),
             [x_file], [r"'conv'", r"Conv", r"has 2 channels; W \[3, 3, 3, 3\] with group 1 takes 3 per group"]),
            ("a pooling window whose dilated taps step over the input",
             save_model("maxpool_stepping_over", tiny_model(
                 [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 1], dilations=[3, 1],
                                   pads=[1, 0, 1, 0])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])], [y(1, 1, 1, 3)],
                 check=True)),
             [save_tensor("x_short", np.ones((1, 1, 2, 3), np.float32), "x")],
             [r"'pool'", r"MaxPool", r"window 0 of axis 2 reads no input cell"]),
            ("an attribute value ONNX does not define (Conv auto_pad \"MIDDLE\")",
             save_model("conv_auto_pad", tiny_model(
                 [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3], auto_pad="MIDDLE")],
                 [x4], [y(1, 2, 3, 3)], [weight])),
             [x_file], [r"'conv'", r"Conv", r"auto_pad", r"MIDDLE"]),
            ("an input of the wrong shape", cifar_model,
             [save_tensor("wrong_shape", rng.standard_normal((4, 3, 30, 30)).astype(np.float32))],
             [r"'input'", r"\[4, 3, 30, 30\]", r"wrong_shape\.pb"]),
            ("an input of the wrong data type", cifar_model,
             [save_tensor("wrong_type", rng.standard_normal((4, 3, 32, 32)))],
             [r"'input'", r"DOUBLE", r"FLOAT", r"wrong_type\.pb"]),
            ("one input too many", cifar_model, [cifar_input, cifar_input], [r"1 input", r"2"]),
            ("a truncated model file", save_bytes("truncated.onnx", cifar_bytes[: len(cifar_bytes) // 2]),
             [cifar_input], [r"truncated\.onnx", r"not an ONNX model"]),
            ("a corrupt model file", save_bytes("corrupt.onnx", bytes(corrupt)),
             [cifar_input], [r"corrupt\.onnx", r"not an ONNX model"]),
            ("a model whose node reads a value nothing makes",
             save_model("dangling", tiny_model([helper.make_node("Relu", ["nowhere"], ["y"], name="orphan")],
                                               [x4], [y(1, 2, 5, 5)])),
             [x_file], [r"orphan", r"nowhere"]),
            ("a truncated input file", cifar_model,
             [save_bytes("truncated_input.pb", open(cifar_input, "rb").read()[:1000])],
             [r"truncated_input\.pb"]),
            ("a comparison before version 7 of operands that differ in shape, without broadcast",
             save_model("less1_shapes", tiny_model(
                 [helper.make_node("Less", ["x", "b"], ["y"], name="cmp")], [x4],
                 [helper.make_tensor_value_info("y", TensorProto.BOOL, [1, 2, 5, 5])],
                 [numpy_helper.from_array(np.ones(5, np.float32), name="b")], opset=1)),
             [x_file], [r"'cmp'", r"Less", r"\[5\]", r"broadcast is 0"]),
            # Each of the next five crashed in, or did not return from, libonnx's shape inference
            # (or overflowed in the importer) before the importer refused it.
            ("a Conv over a value declared of rank 4 and of rank 3 (a graph input that is an output too)",
             save_model("declared_twice", tiny_model(
                 [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [x4],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m", "h", "w"]),
                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5])], [weight])),
             [x_file], [r"node name: conv", r"W has rank 4 and X rank 3; ONNX's Conv takes a W of X's rank"]),
            ("a Conv in an If branch over a rank-3 value",
             save_model("branch_conv_rank3", tiny_model(
                 [helper.make_node("If", ["c"], ["y"], name="choose",
                                   then_branch=helper.make_graph(
                                       [helper.make_node("Conv", ["x3", "w"], ["t"], name="conv_then")], "then",
                                       [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["a", "b", "c"])]),
                                   else_branch=helper.make_graph(
                                       [helper.make_node("Relu", ["x3"], ["e"])], "else",
                                       [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["a", "b", "c"])]))],
                 [helper.make_tensor_value_info("x3", TensorProto.FLOAT, [2, 5, 5]),
                  helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])], [weight])),
             [save_tensor("x3", np.ones((2, 5, 5), np.float32), "x3"), save_tensor("c", np.array(True), "c")],
             [r"'conv_then'", r"then_branch of node 0 'choose'", r"rank 3"]),
            ("a MaxPool with auto_pad SAME over an extent beyond 2^31 - 1 (a Constant's)",
             save_model("extent_2_36", tiny_model(
                 [helper.make_node("Constant", [], ["c"], value=big_constant),
                  helper.make_node("MaxPool", ["c"], ["y"], name="pool", kernel_shape=[1, 1], strides=[1, 2],
                                   auto_pad="SAME_UPPER")], [],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", "h", "w"])])),
             [], [r"node name: pool", r"X's extent 68719476736 along axis 3 over stride 2 is beyond 2\^24"]),
            ("a Reshape whose products pass 64 bits (libonnx's remainder of them trapped)",
             save_model("reshape_products", tiny_model(
                 [helper.make_node("Constant", [], ["xr"], value=wide_constant),
                  helper.make_node("Reshape", ["xr", "s"], ["y"], name="fold")], [],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a"] * 8)],
                 [numpy_helper.from_array(np.array([3, 5, 17, 257, 641, 65537, 6700417, -1], np.int64),
                                          name="s")])),
             [], [r"node name: fold", r"X's extents multiply past 64 bits"]),
            ("a Conv whose group times W's dim 1 passes 64 bits",
             save_model("conv_group_2_62", tiny_model(
                 [helper.make_node("Conv", ["x", "w0"], ["y"], name="conv", group=2**62 + 1)], [x4],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "m", "h", "w"])],
                 [numpy_helper.from_array(np.ones((0, 2, 3, 3), np.float32), name="w0")])),
             [x_file], [r"'conv'", r"has 2 channels; W \[0, 2, 3, 3\] with group 4611686018427387905 takes 2 per group"]),
            ("an Unsqueeze that names an axis twice",
             save_model("unsqueeze_twice", tiny_model(
                 [helper.make_node("Unsqueeze", ["x"], ["y"], name="grow", axes=[-6, 0])], [x4],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 5, 5])], opset=11)),
             [x_file], [r"'grow'", r"Unsqueeze", r"axis 0 twice"]),
        ]
        for what, model, inputs, words in cases:
            out = os.path.join(scratch, "out")
            command = [args.run_onnx, model]
            for f in inputs:
                command += ["--input", f]
            command += ["--output-dir", out]
            result = run(command, timeout=120)
            message = result.stderr.strip()
            label = f"refusal of {what}"
            if result.returncode != 2:
                fail(f"{label}: {status_text(result.returncode)}, expected status 2: {message[-1500:]}")
                continue
            missing = [w for w in words if not re.search(w, message)]
            if missing:
                fail(f"{label}: the message lacks {missing}: {message}")
            if re.search(r"^output \d+ ", result.stdout, re.M) or os.path.exists(out):
                fail(f"{label}: refused, yet it ran (outputs printed or written)")
            if not missing:
                print(f"{label}: status 2: {message}")

        # What ONNX allowed before version 7 is mapped, not refused: a comparison and a logical
        # operator with broadcast 1 (B's dims A's from axis on), against numpy.
        a = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
        b = rng.standard_normal(2).astype(np.float32)
        for op, fn in (("Less", np.less), ("Greater", np.greater)):
            label = f"{op} version 1 with broadcast 1 and axis 1"
            model = save_model(op + "1_broadcast", tiny_model(
                [helper.make_node(op, ["x", "b"], ["y"], name="cmp", broadcast=1, axis=1)], [x4],
                [helper.make_tensor_value_info("y", TensorProto.BOOL, [1, 2, 5, 5])],
                [numpy_helper.from_array(b, name="b")], opset=1))
            expected = os.path.join(scratch, op + "_expected")
            os.makedirs(expected, exist_ok=True)
            save_bytes(os.path.join(op + "_expected", "output_0.pb"),
                       numpy_helper.from_array(fn(a, b.reshape(1, 2, 1, 1)), name="y").SerializeToString())
            out = os.path.join(scratch, op + "_out")
            result = run([args.run_onnx, model, "--input", save_tensor(op + "_a", a, "x"), "--expect", expected,
                          "--output-dir", out], timeout=120)
            if result.returncode != 0:
                fail(f"{label}: {status_text(result.returncode)}: {result.stderr.strip()[-1500:]}")
            elif check_outputs(label, result, out, expected, 1):
                print(f"{label}: as numpy")

        # --expect: an expected infinity matches only itself (rtol |inf| let any value pass).
        label = "--expect with an expected -inf and a finite output"
        y2 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        model = save_model("identity_inf", tiny_model([helper.make_node("Identity", ["x"], ["y"], name="same")],
                                                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                                      [y2], []))
        expected = os.path.join(scratch, "inf_expected")
        os.makedirs(expected, exist_ok=True)
        save_bytes(os.path.join("inf_expected", "output_0.pb"),
                   numpy_helper.from_array(np.array([1, -np.inf], np.float32), name="y").SerializeToString())
        result = run([args.run_onnx, model, "--input",
                      save_tensor("finite_x", np.array([1, -3.4e38], np.float32), "x"), "--expect", expected],
                     timeout=120)
        if result.returncode == 0 or not re.search(r"^output 0 .*MISMATCH", result.stdout, re.M):
            fail(f"{label}: {status_text(result.returncode)}, expected a mismatch: {result.stdout.strip()[-500:]}")
        else:
            print(f"{label}: a mismatch")

        # --expect with zero tolerances: int64 values that differ above 2^53, which one double
        # would hold alike, are a mismatch; the same values match.
        label = "--expect of int64 values that differ above 2^53, with --rtol 0 --atol 0"
        model = save_model("identity_int64", tiny_model(
            [helper.make_node("Identity", ["x"], ["y"], name="same")],
            [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [2])]))
        big = np.array([2**53 + 1, -(2**62) - 1], np.int64)
        for name, want, status in [("int64_near", big - np.array([1, -1], np.int64), 1), ("int64_same", big, 0)]:
            os.makedirs(os.path.join(scratch, name), exist_ok=True)
            save_bytes(os.path.join(name, "output_0.pb"), numpy_helper.from_array(want, name="y").SerializeToString())
            result = run([args.run_onnx, model, "--input", save_tensor("big_x", big, "x"), "--expect",
                          os.path.join(scratch, name), "--rtol", "0", "--atol", "0"], timeout=120)
            verdict = "MISMATCH" if status else "ok"
            if result.returncode != status or not re.search(r"^output 0 .*" + verdict, result.stdout, re.M):
                fail(f"{label} ({name}): {status_text(result.returncode)}, expected {verdict}: "
                     f"{result.stdout.strip()[-500:]} {result.stderr.strip()[-500:]}")
            else:
                print(f"{label} ({name}): {verdict}")
    return report("refusals")


# ---------------------------------------------------------------------------------------------
# control flow

def value(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def scalar_constant(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(array)))


def control_flow_model(nodes, inputs, outputs, opset=13):
    graph = helper.make_graph(nodes, "control_flow", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def nested_loop_model():
    """A Loop whose body holds a Loop and an If. The inner body reads the outer body's iteration
    number i and the model's input delta, the If's branches read the outer body's values; names
    repeat in sibling graphs (both branches make y; the inner body and the then branch both make
    s), which the importer renames apart. (ONNX's checker refuses a subgraph name that shadows
    an enclosing graph's.) Its numpy twin is nested_loop_expected."""
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    inner_body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=f),
         helper.make_node("Add", ["x_in", "fi"], ["s"]),
         helper.make_node("Add", ["s", "delta"], ["x_out"]),
         helper.make_node("Cast", ["j"], ["js"], to=f),
         helper.make_node("Identity", ["c_in"], ["c_next"])],
        "inner_body", [value("j", i64, []), value("c_in", b, []), value("x_in", f, [3])],
        [value("c_next", b, []), value("x_out", f, [3]), value("js", f, [])])
    then_branch = helper.make_graph(
        [scalar_constant("two", np.float32(2)), helper.make_node("Mul", ["inner_x", "two"], ["s"]),
         helper.make_node("Identity", ["s"], ["y"])],
        "then", [], [value("y", f, [3])])
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["inner_x", "x"], ["y"])], "else", [], [value("y", f, [3])])
    outer_body = helper.make_graph(
        [scalar_constant("steps", np.int64(2)),
         helper.make_node("Loop", ["steps", "", "x"], ["inner_x", "inner_js"], body=inner_body, name="inner"),
         scalar_constant("one", np.int64(1)),
         helper.make_node("Less", ["i", "one"], ["first"]),
         helper.make_node("If", ["first"], ["chosen"], then_branch=then_branch, else_branch=else_branch,
                          name="choose"),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "outer_body", [value("i", i64, []), value("c", b, []), value("x", f, [3])],
        [value("c_out", b, []), value("chosen", f, [3]), value("inner_js", f, [2])])
    nodes = [helper.make_node("Loop", ["n", "go", "x0"], ["x_final", "js_all"], body=outer_body, name="outer")]
    return control_flow_model(
        nodes, [value("x0", f, [3]), value("n", i64, []), value("go", b, []), value("delta", f, [])],
        [value("x_final", f, [3]), value("js_all", f, [None, 2])])


def nested_loop_expected(x, n, go, delta):
    state, scans = x.astype(np.float32), []
    i = 0
    while go and i < n:
        inner = state
        for _ in range(2):
            inner = (inner + np.float32(i)) + delta
        y = inner * np.float32(2) if i < 1 else inner - state
        state = y.astype(np.float32)
        scans.append(np.array([0, 1], np.float32))
        i += 1
    return [state, np.stack(scans) if scans else np.zeros((0, 2), np.float32)]


def nested_if_model():
    """An If whose then branch holds an If; outputs of two data types; a branch output that is
    an outer value itself (x), others computed from outer values; k made in both branches."""
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    inner_then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["q"])], "inner_then", [],
                                   [value("q", f, [2])])
    inner_else = helper.make_graph([helper.make_node("Identity", ["x"], ["q"])], "inner_else", [],
                                   [value("q", f, [2])])
    then_branch = helper.make_graph(
        [helper.make_node("If", ["b"], ["r"], then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Cast", ["r"], ["k"], to=i64)],
        "then", [], [value("r", f, [2]), value("k", i64, [2])])
    else_branch = helper.make_graph([helper.make_node("Cast", ["x"], ["k"], to=i64)], "else", [],
                                    [value("x", f, [2]), value("k", i64, [2])])
    nodes = [helper.make_node("If", ["a"], ["out", "count"], then_branch=then_branch, else_branch=else_branch)]
    return control_flow_model(nodes, [value("a", b, []), value("b", b, [1]), value("x", f, [2])],
                              [value("out", f, [2]), value("count", i64, [2])])


def nested_if_expected(a, b, x):
    if a:
        r = x + x if b[0] else x
        return [r, r.astype(np.int64)]
    return [x, x.astype(np.int64)]


def simple_loop_model(kind):
    """kind "counted": Loop(M, cond, v0), v + 1.5 each step, the condition passed on. "while":
    Loop("", cond, v0), v doubled each step while the result is below the model's input limit (a
    body that reads an outer value). "neither": the same with no cond either: the body's
    condition alone ends it (as in ONNX Runtime)."""
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    counted = kind == "counted"
    if counted:
        nodes = [scalar_constant("step", np.float32(1.5)), helper.make_node("Add", ["v", "step"], ["v_out"]),
                 helper.make_node("Identity", ["c"], ["c_out"])]
    else:
        nodes = [scalar_constant("two", np.float32(2)), helper.make_node("Mul", ["v", "two"], ["v_out"]),
                 helper.make_node("Less", ["v_out", "limit"], ["below"]),
                 helper.make_node("Identity", ["below"], ["c_out"])]
    d = [2] if counted else [1]  # the while loop's condition is computed from v: one element
    c = [] if counted else [1]
    body = helper.make_graph(nodes, "body", [value("i", i64, []), value("c", b, c), value("v", f, d)],
                             [value("c_out", b, c), value("v_out", f, d)])
    if counted:
        return control_flow_model([helper.make_node("Loop", ["m", "go", "v0"], ["v"], body=body)],
                                  [value("m", i64, []), value("go", b, []), value("v0", f, d)], [value("v", f, d)])
    if kind == "while":
        return control_flow_model([helper.make_node("Loop", ["", "go", "v0"], ["v"], body=body)],
                                  [value("go", b, [1]), value("v0", f, d), value("limit", f, [])], [value("v", f, d)])
    return control_flow_model([helper.make_node("Loop", ["", "", "v0"], ["v"], body=body)],
                              [value("v0", f, d), value("limit", f, [])], [value("v", f, d)])


def simple_loop_expected(kind, *inputs):
    if kind == "counted":
        m, go, v = inputs
        for _ in range(int(m) if go else 0):
            v = v + np.float32(1.5)
        return [v]
    go, v, limit = (np.array([True]),) + inputs if kind == "neither" else inputs
    go = bool(go[0])
    while go:
        v = v * np.float32(2)
        go = bool(v[0] < limit)
    return [v]


def gemm_loop_model(loop_reads_gemm):
    """g = Gemm(x, W, B); r = Relu(g); a Loop of M steps carries v from r and adds, each step, g
    (loop_reads_gemm: its body reads g, which the gemm_activation pass must then leave) or r
    (the pass fuses the Relu into the Gemm, and block 0 is made again beside the Loop's body)."""
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    w = numpy_helper.from_array(np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]], np.float32), "W")
    bias = numpy_helper.from_array(np.array([0.1, -0.2], np.float32), "B")
    added = "g" if loop_reads_gemm else "r"
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]),
                              helper.make_node("Add", ["v", added], ["v_out"])], "body",
                             [value("i", i64, []), value("c", b, []), value("v", f, [1, 2])],
                             [value("c_out", b, []), value("v_out", f, [1, 2])])
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "W", "B"], ["g"]),
                               helper.make_node("Relu", ["g"], ["r"]),
                               helper.make_node("Loop", ["m", "", "r"], ["v"], body=body)],
                              "gemm_loop", [value("x", f, [1, 3]), value("m", i64, [])], [value("v", f, [1, 2])],
                              [w, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def gemm_loop_expected(loop_reads_gemm, x, m):
    w = np.array([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]], np.float32)
    g = x @ w + np.array([0.1, -0.2], np.float32)
    r = np.maximum(g, 0)
    v = r
    for _ in range(int(m)):
        v = v + (g if loop_reads_gemm else r)
    return [v]


def ranked_conv_model(kind):
    """A Conv whose input's rank comes from another op (the importer's guard of libonnx's Conv
    inference reads it as the inference holds it): "sub", a rank-1 constant minus a rank-4 input
    (rank 4, the larger); "unsqueeze" and "unsqueeze11", a rank-3 input unsqueezed at axis 0 (by Unsqueeze
    13's axes input, or 11's attribute); "if", an If whose branches give the rank-4 input or its
    Relu (the rank of its branches, not of its condition). Its numpy twin is
    ranked_conv_expected."""
    f = TensorProto.FLOAT
    w = numpy_helper.from_array(np.linspace(-1, 1, 2 * 2 * 3 * 3).astype(np.float32).reshape(2, 2, 3, 3), "w")
    x4, x3 = value("x", f, [1, 2, 5, 5]), value("x", f, [2, 5, 5])
    inputs, opset, nodes = [x4], 13, []
    if kind == "sub":
        nodes = [scalar_constant("c", np.array([0.5], np.float32)), helper.make_node("Sub", ["c", "x"], ["v"])]
    elif kind == "unsqueeze":
        inputs = [x3]
        nodes = [scalar_constant("axes", np.array([0], np.int64)), helper.make_node("Unsqueeze", ["x", "axes"], ["v"])]
    elif kind == "unsqueeze11":
        inputs, opset = [x3], 11
        nodes = [helper.make_node("Unsqueeze", ["x"], ["v"], axes=[0])]
    else:
        inputs = [x4, value("a", TensorProto.BOOL, [])]
        then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "then", [],
                                        [value("y", f, [1, 2, 5, 5])])
        else_branch = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "else", [],
                                        [value("y", f, [1, 2, 5, 5])])
        nodes = [helper.make_node("If", ["a"], ["v"], then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes + [helper.make_node("Conv", ["v", "w"], ["y"], name="conv")], "ranked",
                              inputs, [value("y", f, [1, 2, 3, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def ranked_conv_expected(kind, x, a=None):
    if kind == "sub":
        v = 0.5 - x
    elif kind.startswith("unsqueeze"):
        v = x.reshape(1, 2, 5, 5)
    else:
        v = x if a else np.maximum(x, 0)
    w = np.linspace(-1, 1, 2 * 2 * 3 * 3).astype(np.float32).reshape(2, 2, 3, 3)
    return [conv_nchw(v.astype(np.float32), w).astype(np.float32)]


def control_flow(args):
    started = time.monotonic()
    f, b = TensorProto.FLOAT, TensorProto.BOOL
    with tempfile.TemporaryDirectory(prefix="onnx-control-flow-") as scratch:
        def save(name, model):
            path = os.path.join(scratch, name + ".onnx")
            with open(path, "wb") as out:
                out.write(model.SerializeToString())
            return path

        def tensor_file(name, array):
            path = os.path.join(scratch, name + ".pb")
            with open(path, "wb") as out:
                out.write(numpy_helper.from_array(array).SerializeToString())
            return path

        x3 = np.array([1.5, -2.0, 0.25], np.float32)
        cases = []
        # n 0: no step, the scan output empty ([0, 2]).
        for n in [0, 1, 3, 4]:
            inputs = [x3, np.array(n, np.int64), np.array(True), np.array(0.5, np.float32)]
            cases.append((f"nested Loop, If inside (n {n})", "nested_loop", nested_loop_model(), inputs,
                          nested_loop_expected(*inputs)))
        v2 = np.array([0.5, -1.0], np.float32)
        for m, go in [(3, True), (3, False), (0, True)]:
            inputs = [np.array(m, np.int64), np.array(go), v2]
            cases.append((f"Loop with M {m} and cond {go}", "counted_loop", simple_loop_model("counted"), inputs,
                          simple_loop_expected("counted", *inputs)))
        for go in [True, False]:
            inputs = [np.array([go]), np.array([0.75], np.float32), np.array(5.0, np.float32)]
            cases.append((f"Loop with cond {go} alone (a while loop)", "while_loop", simple_loop_model("while"),
                          inputs, simple_loop_expected("while", *inputs)))
        inputs = [np.array([0.75], np.float32), np.array(5.0, np.float32)]
        cases.append(("Loop with neither M nor cond (its body's condition ends it)", "neither_loop",
                      simple_loop_model("neither"), inputs, simple_loop_expected("neither", *inputs)))
        for a, bb in [(True, True), (True, False), (False, True)]:
            inputs = [np.array(a), np.array([bb]), np.array([0.75, -3.0], np.float32)]
            cases.append((f"nested If (a {a}, b {bb})", "nested_if", nested_if_model(), inputs,
                          nested_if_expected(*inputs)))
        # The fuse passes beside a Loop: the Relu fused into the Gemm when only it reads the
        # Gemm's output; left alone when the Loop's body reads that output too.
        x13 = np.array([[1.0, -0.5, 2.0]], np.float32)
        for reads in [False, True]:
            inputs = [x13, np.array(3, np.int64)]
            cases.append((f"Gemm + Relu before a Loop whose body reads {'g' if reads else 'r'}",
                          f"gemm_loop_{int(reads)}", gemm_loop_model(reads), inputs,
                          gemm_loop_expected(reads, *inputs), {"gemm_activation": 0 if reads else 1}))
        # A Conv's input whose rank the importer follows through Sub, Unsqueeze and If (it
        # refused these, taking the rank of Sub's first input, Unsqueeze's input or If's condition).
        x4 = np.linspace(-2, 2, 50).astype(np.float32).reshape(1, 2, 5, 5)
        for kind, inputs in [("sub", [x4]), ("unsqueeze", [x4.reshape(2, 5, 5)]),
                             ("unsqueeze11", [x4.reshape(2, 5, 5)]), ("if", [x4, np.array(True)]),
                             ("if", [x4, np.array(False)])]:
            what = f"Conv after {kind}" + (f" ({inputs[1]})" if len(inputs) > 1 else "")
            cases.append((what, f"ranked_{kind}_{len(cases)}", ranked_conv_model(kind), inputs,
                          ranked_conv_expected(kind, *inputs)))
        for case in cases:
            what, name, model, inputs, expected = case[:5]
            fused_expected = case[5] if len(case) > 5 else None
            path = save(name, model)
            command = [args.run_onnx, path]
            for k, array in enumerate(inputs):
                command += ["--input", tensor_file(f"{name}_input_{k}", array)]
            for family in args.families:
                out = os.path.join(scratch, f"{name}_{family}_out")
                plan = ["--plan"] if fused_expected is not None else []
                result = run(command + ["--output-dir", out] + plan + FAMILIES[family], timeout=120)
                label = f"{what} ({family})"
                if result.returncode != 0:
                    fail(f"{label}: {status_text(result.returncode)}: {result.stderr.strip()[-1500:]}")
                    continue
                bad = False
                if fused_expected is not None:
                    got = {k: v for k, v in fusions(result.stdout).items() if k in fused_expected}
                    if got != fused_expected:
                        fail(f"{label}: fused {got}, expected {fused_expected}")
                        bad = True
                for k, want in enumerate(expected):
                    diff = compare(load_tensor(os.path.join(out, f"output_{k}.pb")), want)
                    if diff:
                        fail(f"{label}: output {k} against numpy: {diff}")
                        bad = True
                if not bad:
                    print(f"{label}: outputs match numpy")

        # Refused before anything runs: exit 2 and the words.
        i64 = TensorProto.INT64
        body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]),
                                  helper.make_node("Tanh", ["v"], ["v_out"], name="squash")],
                                 "body", [value("i", i64, []), value("c", b, []), value("v", f, [2])],
                                 [value("c_out", b, []), value("v_out", f, [2])])
        tanh_loop = control_flow_model([helper.make_node("Loop", ["m", "", "v0"], ["v"], body=body, name="steps")],
                                       [value("m", i64, []), value("v0", f, [2])], [value("v", f, [2])])
        seq_branch = helper.make_graph([scalar_constant("t", np.float32(1)),
                                        helper.make_node("SequenceConstruct", ["t"], ["s"])], "branch", [],
                                       [helper.make_tensor_sequence_value_info("s", f, [])])
        seq_if = control_flow_model([helper.make_node("If", ["a"], ["s"], then_branch=seq_branch,
                                                      else_branch=seq_branch)],
                                    [value("a", b, [])], [helper.make_tensor_sequence_value_info("s", f, [])])
        m_file = tensor_file("m", np.array(2, np.int64))
        v_file = tensor_file("v0", np.array([1, 2], np.float32))
        a_file = tensor_file("a", np.array(True))
        refusals_cases = [
            ("an unsupported op type in a Loop's body", save("tanh_loop", tanh_loop), [m_file, v_file],
             [r"'squash'", r"Tanh", r"not supported", r"body of node 0 'steps' \(Loop\)"]),
            ("an If whose output is a sequence", save("seq_if", seq_if), [a_file], [r"'s'", r"not a tensor"]),
        ]
        for what, path, files, words in refusals_cases:
            command = [args.run_onnx, path]
            for name in files:
                command += ["--input", name]
            result = run(command, timeout=120)
            label = f"refusal of {what}"
            message = result.stderr.strip()
            missing = [w for w in words if not re.search(w, message)]
            if result.returncode != 2:
                fail(f"{label}: {status_text(result.returncode)}, expected status 2: {message[-1500:]}")
            elif missing:
                fail(f"{label}: the message lacks {missing}: {message}")
            elif re.search(r"^output \d+ ", result.stdout, re.M):
                fail(f"{label}: refused, yet it ran")
            else:
                print(f"{label}: status 2: {message}")
    print(f"control flow tests in {time.monotonic() - started:.1f} s")
    return report("control flow")


# ---------------------------------------------------------------------------------------------
# fusion

FUSE_PASSES = ["conv_bn", "conv_bias", "conv_residual", "conv_activation", "gemm_activation"]
PASS_LINE = re.compile(r"^pass (\w+): (?:(\d+) fused|(off))$", re.M)
# The fusions of each network with every pass on: ResNet-18 a conv_bn per BatchNormalization, a
# conv_residual per Add and a conv_activation per Relu; MobileNetV2 a conv_bias per Conv (its
# B), a conv_residual per Add and a conv_activation per Clip; SqueezeNet a conv_bias and a
# conv_activation per Conv; the CIFAR net a conv_bn per BatchNormalization (its Conv's B
# folded in), a conv_bias for the last Conv, a conv_activation per Relu and for the Sigmoid
# gate. No Gemm is followed by an activation (cifar's MatMul is followed by an Add).
EXPECTED_FUSIONS = {
    "resnet18": {"conv_bn": 20, "conv_bias": 0, "conv_residual": 8, "conv_activation": 17, "gemm_activation": 0},
    "mobilenetv2": {"conv_bn": 0, "conv_bias": 52, "conv_residual": 10, "conv_activation": 35,
                    "gemm_activation": 0},
    "squeezenet11": {"conv_bn": 0, "conv_bias": 26, "conv_residual": 0, "conv_activation": 26,
                     "gemm_activation": 0},
    "cifar": {"conv_bn": 2, "conv_bias": 1, "conv_residual": 0, "conv_activation": 3, "gemm_activation": 0},
}


def fusions(stdout):
    """{pass: fusions made, or None where it was off} from run-onnx's --plan."""
    return {m.group(1): None if m.group(3) else int(m.group(2)) for m in PASS_LINE.finditer(stdout)}


def check_fusions(label, stdout, expected):
    """The 'pass NAME: N fused' lines of --plan against `expected` ({pass: N, or None for off})."""
    found = fusions(stdout)
    if list(found) != FUSE_PASSES:
        fail(f"{label}: --plan reports the passes {list(found)}, expected {FUSE_PASSES} in that order")
    elif found != expected:
        fail(f"{label}: --plan reports the fusions {found}, expected {expected}")
    else:
        text = ", ".join(f"{p} {'off' if n is None else n}" for p, n in found.items())
        print(f"  fusions: {text}")


def conv_nchw(x, w, b=None, pad=0):
    """Conv (stride 1, group 1) in float64: x [N, C, H, W], w [O, C, KH, KW]."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    h, wd = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("oc,nchw->nohw", w[:, :, i, j].astype(np.float64), x[:, :, i:i + h, j:j + wd])
    return out if b is None else out + b.astype(np.float64).reshape(1, -1, 1, 1)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def conv_fusion_model(rng):
    """Every conv pattern once, with the float64 result: Conv+B -> BatchNormalization -> Relu
    (conv_bn folding B too, conv_activation); Conv -> BatchNormalization -> Add of the Relu's
    output -> Clip (conv_bn, conv_residual, conv_activation); Conv+B -> Sigmoid (conv_bias,
    conv_activation). The statistics are far from the identity: mean != 0, var != 1, epsilon
    1e-3 and 0.02."""
    def f32(*shape, scale=1.0, low=None):
        if low is not None:
            return rng.uniform(low, scale, shape).astype(np.float32)
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w1, b1, w2, w3, b3 = f32(4, 3, 3, 3, scale=0.4), f32(4), f32(4, 4, 3, 3, scale=0.3), f32(2, 4, 1, 1), f32(2)
    bn = []
    for k in range(2):
        bn.append((f32(4, scale=1.5, low=0.5), f32(4), f32(4, scale=0.8) + 0.5, f32(4, scale=3.0, low=0.2)))
    eps = [1e-3, 0.02]
    x = f32(1, 3, 8, 8)

    def batch_norm(v, k):
        gamma, beta, mean, var = (t.astype(np.float64).reshape(1, -1, 1, 1) for t in bn[k])
        return (v - mean) / np.sqrt(var + np.float64(np.float32(eps[k]))) * gamma + beta

    c = np.maximum(batch_norm(conv_nchw(x, w1, b1, 1), 0), 0)
    g = np.clip(batch_norm(conv_nchw(c, w2, None, 1), 1) + c, 0.0, 1.5)
    y = sigmoid(conv_nchw(g, w3, b3))

    inits = [numpy_helper.from_array(v, name) for name, v in
             [("w1", w1), ("b1", b1), ("w2", w2), ("w3", w3), ("b3", b3),
              ("lo", np.array(0.0, np.float32)), ("hi", np.array(1.5, np.float32))]]
    for k in range(2):
        for role, v in zip(["scale", "bias", "mean", "var"], bn[k]):
            inits.append(numpy_helper.from_array(v, f"bn{k}_{role}"))
    bn_inputs = [[f"bn{k}_{r}" for r in ["scale", "bias", "mean", "var"]] for k in range(2)]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["a"] + bn_inputs[0], ["b"], name="bn1", epsilon=eps[0]),
        helper.make_node("Relu", ["b"], ["c"], name="relu1"),
        helper.make_node("Conv", ["c", "w2"], ["d"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["d"] + bn_inputs[1], ["e"], name="bn2", epsilon=eps[1]),
        helper.make_node("Add", ["e", "c"], ["f"], name="residual"),
        helper.make_node("Clip", ["f", "lo", "hi"], ["g"], name="clip"),
        helper.make_node("Conv", ["g", "w3", "b3"], ["h"], name="conv3", kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["h"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(nodes, "conv_fusion", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model, [x], [y], {"conv_bn": 2, "conv_bias": 1, "conv_residual": 1, "conv_activation": 3,
                             "gemm_activation": 0}


def gemm_fusion_model(rng):
    """Gemm -> Relu, Gemm (transposed B, alpha, beta, C [M, N]) -> Clip, Gemm -> Sigmoid, each
    a gemm_activation; and a Gemm whose output is also a graph output before its Relu, which
    stays as it is."""
    x = rng.standard_normal((3, 5)).astype(np.float32)
    b1, c1 = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    b2, c2 = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    b3 = rng.standard_normal((5, 6)).astype(np.float32)
    x64 = x.astype(np.float64)
    p1 = x64 @ b1 + c1
    outs = [np.maximum(p1, 0), np.clip(0.7 * x64 @ b2.astype(np.float64).T + 0.5 * c2, -0.2, 0.3),
            sigmoid(x64 @ b3), np.maximum(p1, 0), p1]
    nodes = [
        helper.make_node("Gemm", ["x", "b1", "c1"], ["p1"], name="gemm_relu"),
        helper.make_node("Relu", ["p1"], ["y1"], name="relu"),
        helper.make_node("Gemm", ["x", "b2", "c2"], ["p2"], name="gemm_clip", transB=1, alpha=0.7, beta=0.5),
        helper.make_node("Clip", ["p2", "lo", "hi"], ["y2"], name="clip"),
        helper.make_node("Gemm", ["x", "b3"], ["p3"], name="gemm_sigmoid"),
        helper.make_node("Sigmoid", ["p3"], ["y3"], name="sigmoid"),
        helper.make_node("Gemm", ["x", "b1", "c1"], ["p4"], name="gemm_exposed"),
        helper.make_node("Relu", ["p4"], ["y4"], name="relu_apart"),
    ]
    inits = [numpy_helper.from_array(v, n) for n, v in
             [("b1", b1), ("c1", c1), ("b2", b2), ("c2", c2), ("b3", b3),
              ("lo", np.array(-0.2, np.float32)), ("hi", np.array(0.3, np.float32))]]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "gemm_fusion", [value("x", TensorProto.FLOAT, [3, 5])],
                              [value("y1", TensorProto.FLOAT, [3, 4]), value("y2", TensorProto.FLOAT, [3, 4]),
                               value("y3", TensorProto.FLOAT, [3, 6]), value("y4", TensorProto.FLOAT, [3, 4]),
                               value("p4", TensorProto.FLOAT, [3, 4])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model, [x], outs, {"conv_bn": 0, "conv_bias": 0, "conv_residual": 0, "conv_activation": 0,
                              "gemm_activation": 3}


def run_checked(args, label, model, inputs, expected_dir, count, extra, scratch, atol=ATOL):
    """run-onnx with --expect, --output-dir and --plan, its outputs checked here as well; its
    stdout, or None when it failed."""
    out = os.path.join(scratch, re.sub(r"\W+", "_", label))
    command = [args.run_onnx, model]
    for f in inputs:
        command += ["--input", f]
    command += ["--expect", expected_dir, "--output-dir", out, "--rtol", str(RTOL), "--atol", str(atol), "--plan"]
    result = run(command + extra)
    if result.returncode not in (0, 1):
        fail(f"{label}: run-onnx exited with {status_text(result.returncode)}: {result.stderr.strip()[-1500:]}")
        return None
    # On a mismatch (status 1), check_outputs names the output lines that failed.
    matched = check_outputs(label, result, out, expected_dir, count, atol)
    return result.stdout if matched and result.returncode == 0 else None


def fusion(args):
    started = time.monotonic()
    rng = np.random.RandomState(7)
    off = {p: None for p in FUSE_PASSES}
    with tempfile.TemporaryDirectory(prefix="onnx-fusion-") as scratch:
        # The small models against numpy, each pass on and all off, on every family.
        for name, (model, inputs, outputs, expected) in [("conv_fusion", conv_fusion_model(rng)),
                                                         ("gemm_fusion", gemm_fusion_model(rng))]:
            directory = os.path.join(scratch, name)
            os.makedirs(directory)
            path = os.path.join(directory, "model.onnx")
            onnx.save(model, path)
            files = []
            for k, v in enumerate(inputs):
                files.append(os.path.join(directory, f"input_{k}.pb"))
                onnx.save_tensor(numpy_helper.from_array(v, model.graph.input[k].name), files[-1])
            for k, v in enumerate(outputs):
                onnx.save_tensor(numpy_helper.from_array(v.astype(np.float32), model.graph.output[k].name),
                                 os.path.join(directory, f"output_{k}.pb"))
            for family in args.families:
                runs = [([], expected), (["--no-fuse", "all"], off)]
                if name == "conv_fusion":
                    # The Relu at another op_device than the conv before it: not fused.
                    runs.append((["--op-device", "Relu=cpu"], dict(expected, conv_activation=2)))
                for extra, wanted in runs:
                    label = f"{name} ({family}{', ' + ' '.join(extra) if extra else ''})"
                    stdout = run_checked(args, label, path, files, directory, len(outputs), FAMILIES[family] + extra,
                                         scratch)
                    if stdout is not None:
                        print(f"{label}: outputs match numpy")
                        check_fusions(label, stdout, wanted)
                        if name == "conv_fusion" and not extra:
                            # The folded operators' origins name every node they came from.
                            for words in ["'conv1' (Conv) + node 1 'bn1' (BatchNormalization) + node 2 'relu1'",
                                          "'conv2' (Conv) + node 4 'bn2' (BatchNormalization) + node 5 'residual' "
                                          "(Add) + node 6 'clip' (Clip)"]:
                                if words not in stdout:
                                    fail(f"{label}: --plan names no operator made from {words}")
        # The networks: every pass off, against ONNX Runtime (all on: the models tests), on oneDNN
        # where it is built.
        family = "onednn" if "onednn" in args.families else args.families[0]
        for model in MODELS:
            directory = os.path.join(args.models, model)
            data = os.path.join(directory, "test_data_set_0")
            count = len([f for f in os.listdir(data) if re.fullmatch(r"output_\d+\.pb", f)])
            inputs = [os.path.join(data, f) for f in sorted(os.listdir(data)) if re.fullmatch(r"input_\d+\.pb", f)]
            runs = [["--no-fuse", "all"]]
            if model == "resnet18":
                runs += [["--no-fuse", p] for p in FUSE_PASSES]
            for extra in runs:
                label = f"{model} ({family}, {' '.join(extra)})"
                stdout = run_checked(args, label, os.path.join(directory, "model.onnx"), inputs, data, count,
                                     FAMILIES[family] + extra, scratch, MODEL_ATOL.get(model, ATOL))
                if stdout is None:
                    continue
                print(f"{label}: outputs match ONNX Runtime")
                if extra[1] == "all":
                    check_fusions(label, stdout, off)
                else:
                    wanted = dict(EXPECTED_FUSIONS[model], **{extra[1]: None})
                    if extra[1] == "conv_bn":  # each Add and Relu then follows a batch_norm or an Add
                        wanted["conv_residual"] = wanted["conv_activation"] = 0
                    if extra[1] == "conv_residual":  # the Relu after each Add stays apart
                        wanted["conv_activation"] = EXPECTED_FUSIONS[model]["conv_activation"] - 8
                    check_fusions(label, stdout, wanted)
        # An unknown pass: a usage error that lists the passes.
        result = run([args.run_onnx, os.path.join(args.models, "cifar", "model.onnx"), "--no-fuse", "conv_everything"])
        if result.returncode != 2 or not all(p in result.stderr for p in FUSE_PASSES + ["conv_everything"]):
            fail(f"--no-fuse conv_everything: {status_text(result.returncode)}, expected status 2 and a message "
                 f"naming it and listing the passes: {result.stderr.strip()}")
        else:
            print(f"--no-fuse conv_everything: status 2: {result.stderr.strip()}")
    print(f"fusion tests in {time.monotonic() - started:.1f} s")
    return report("fusion")


def report(what):
    if failures:
        print(f"{what}: {len(failures)} failure(s)")
        return 1
    print(f"{what}: all passed")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--models", required=True)
    p.add_argument("--stamp", required=True)
    p.add_argument("--ort")
    p.add_argument("--node", default="node")
    p = sub.add_parser("models")
    p.add_argument("--run-onnx", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("family", choices=list(FAMILIES))
    p = sub.add_parser("node")
    p.add_argument("--run-onnx", required=True)
    p.add_argument("--node-tests", required=True)
    p.add_argument("family", choices=["cpu", "onednn", "opencl"])
    p = sub.add_parser("refusals")
    p.add_argument("--run-onnx", required=True)
    p.add_argument("--models", required=True)
    p = sub.add_parser("control_flow")
    p.add_argument("--run-onnx", required=True)
    p.add_argument("families", nargs="+", choices=["cpu", "onednn", "opencl"])
    p = sub.add_parser("fusion")
    p.add_argument("--run-onnx", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("families", nargs="+", choices=["cpu", "onednn", "opencl"])
    args = parser.parse_args()
    if args.command != "prepare" and not os.access(args.run_onnx, os.X_OK):
        print(f"onnx_test.py: {args.run_onnx} is not built (ninja -C build examples/onnx/run_onnx)", file=sys.stderr)
        return 1
    return {"prepare": prepare, "models": models, "node": node_tests, "refusals": refusals,
            "fusion": fusion, "control_flow": control_flow}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
