#!/usr/bin/python3
"""Builds the networks of the ONNX tests (test/onnx) as exporters write them: ResNet-18,
MobileNetV2 and SqueezeNet 1.1 at 224x224, batch 1, and a small CIFAR-sized net at batch 4;
opset 13, seeded weights, one seeded input each.

Every tensor's value on that input is computed alongside in numpy (float64) while the graph is
built: batch norm's running statistics are drawn around the statistics that its input really
has (so positive, random variances and nonzero means keep every activation O(1)), and each
classifier is scaled so that its logits spread over a few units (a softmax neither flat nor
one-hot). The numpy outputs are kept (numpy_output_K.npy) so that the reference step can check
ONNX Runtime against an implementation written independently of it.

Writes DIR/<model>/model.onnx, DIR/<model>/test_data_set_0/input_0.pb and numpy_output_K.npy,
after onnx.checker (with shape inference) has accepted each model.

--batch N (for scripts/bench) makes each model and its input at batch N instead: N images drawn
from the same seed (the first is the batch-1 input), and the statistics that batch norm and the
classifier are drawn around taken over the N of them, so that the weights differ slightly from
the batch-1 model's.

Usage: make_models.py [--batch N] DIR [MODEL]...   (models: resnet18 mobilenetv2 squeezenet11 cifar)
Needs Debian's python3-onnx and python3-numpy (scripts/deps): run it with /usr/bin/python3.
"""

import os
import sys

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
BN_EPSILON = 1e-5
# Batch norm's shift (beta) is drawn around this: relu and relu6 then zero the values below
# about -1 standard deviation rather than half of them. Half of them made the nets' Jacobians
# grow relative errors by about 1.2 per layer (the mean that relu leaves is discarded by the
# next layer, the rounding errors are not): a float32 MobileNetV2 differed from a float64 one by
# twice the tests' tolerance; with this shift (and the zero-sum filters of Net.conv_weights),
# by a seventh of it.
BN_SHIFT = 1.0


# The numpy side: what each ONNX operator computes, in float64, NCHW.

def conv_np(x, w, b, strides, pads, group):
    """ONNX Conv; pads are [top, left, bottom, right] (ONNX's begin..., end... order)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
    channels, out_channels = x.shape[1], w.shape[0]
    if group == 1:
        y = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)
    elif group == channels == out_channels and w.shape[1] == 1:
        y = np.einsum("nchwij,cij->nchw", win, w[:, 0])
    else:
        cin, cout = channels // group, out_channels // group
        y = np.concatenate([
            np.tensordot(win[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout],
                         axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2) for g in range(group)
        ], axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def pool_np(x, kind, kernel, strides, pads, ceil_mode=False, count_include_pad=False):
    """ONNX MaxPool / AveragePool (2-D)."""
    h, w = x.shape[2:]

    def extent(size, begin, end, k, s):
        span = size + begin + end - k
        out = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (out - 1) * s >= size + begin:
            out -= 1  # the last window must start inside the input or its leading padding
        return out, max(0, (out - 1) * s + k - (size + begin + end))

    ho, extra_h = extent(h, pads[0], pads[2], kernel[0], strides[0])
    wo, extra_w = extent(w, pads[1], pads[3], kernel[1], strides[1])
    widths = ((0, 0), (0, 0), (pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w))

    def windows(a):
        return sliding_window_view(a, tuple(kernel), axis=(2, 3))[:, :, ::strides[0], ::strides[1]][:, :, :ho, :wo]

    if kind == "max":
        return windows(np.pad(x, widths, constant_values=-np.inf)).max(axis=(4, 5))
    total = windows(np.pad(x, widths)).sum(axis=(4, 5))
    ones = np.ones((1, 1, h, w))
    if count_include_pad:  # the padding counts, the extension of ceil_mode does not
        ones = np.pad(ones, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=1)
        count = windows(np.pad(ones, ((0, 0), (0, 0), (0, extra_h), (0, extra_w)))).sum(axis=(4, 5))
    else:
        count = windows(np.pad(ones, widths)).sum(axis=(4, 5))
    return total / count


def softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid_np(x):
    return 1.0 / (1.0 + np.exp(-x))


class Net:
    """A graph under construction. Each method adds a node (and its initializers) and returns
    the name of its output; self.value[name] is that tensor's value on the model's input."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.RandomState(seed)
        self.nodes, self.initializers = [], []
        self.value = {}
        self.counts = {}

    def fresh(self, prefix):
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        return f"{prefix}_{self.counts[prefix]}"

    def add_initializer(self, name, array, dtype=np.float32):
        array = np.asarray(array, dtype=dtype)
        self.initializers.append(numpy_helper.from_array(array, name=name))
        self.value[name] = array.astype(np.float64) if dtype == np.float32 else array
        return name

    def add_node(self, op_type, inputs, value, prefix=None, **attributes):
        name = self.fresh(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attributes))
        self.value[name] = value
        return name

    # Layers.

    def he_weights(self, shape, fan_in, gain=2.0):
        return self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)

    def conv_weights(self, shape):
        """He's initialisation, each filter made zero-sum (then scaled back to its norm): the
        positive mean of relu's outputs then gives no large mean in the filter's, which batch
        norm would subtract, losing the signal and keeping the rounding errors (see BN_SHIFT;
        this halves the float32 MobileNetV2's error again)."""
        w = self.he_weights(shape, int(np.prod(shape[1:])))
        if np.prod(shape[1:]) > 1:
            centred = w - w.mean(axis=(1, 2, 3), keepdims=True)
            w = centred * (np.linalg.norm(w) / np.linalg.norm(centred))
        return w

    def conv(self, x, out_channels, kernel, stride=1, pad=0, group=1, bias=True, weights=None,
             conv_bias=None):
        in_channels = self.value[x].shape[1]
        shape = (out_channels, in_channels // group, kernel, kernel)
        w = self.conv_weights(shape) if weights is None else weights
        b = None
        if bias:
            b = self.rng.standard_normal(out_channels) * 0.05 if conv_bias is None else conv_bias
        name = self.fresh("conv")
        inputs = [x, self.add_initializer(name + ".weight", w)]
        if bias:
            inputs.append(self.add_initializer(name + ".bias", b))
        w32 = self.value[inputs[1]]
        b32 = self.value[inputs[2]] if bias else None
        y = conv_np(self.value[x], w32, b32, (stride, stride), (pad,) * 4, group)
        self.nodes.append(helper.make_node("Conv", inputs, [name], name=name, kernel_shape=[kernel, kernel],
                                           strides=[stride, stride], pads=[pad] * 4,
                                           dilations=[1, 1], group=group))
        self.value[name] = y
        return name

    def batch_norm_parameters(self, y):
        """Running statistics drawn around y's own per-channel statistics, and an affine map."""
        channels = y.shape[1]
        axes = tuple(i for i in range(y.ndim) if i != 1)
        mean, var = y.mean(axis=axes), y.var(axis=axes)
        running_mean = mean + 0.2 * np.sqrt(mean**2 + var) * self.rng.standard_normal(channels)
        running_var = var * self.rng.uniform(0.6, 1.6, channels)
        scale = self.rng.uniform(0.7, 1.3, channels)
        shift = BN_SHIFT + self.rng.standard_normal(channels) * 0.2
        return scale, shift, running_mean, running_var

    def batch_norm(self, x):
        y = self.value[x]
        scale, shift, mean, var = self.batch_norm_parameters(y)
        name = self.fresh("bn")
        names = [self.add_initializer(f"{name}.{field}", a)
                 for field, a in (("scale", scale), ("bias", shift), ("mean", mean), ("var", var))]
        s, b, m, v = (self.value[n].reshape(1, -1, 1, 1) for n in names)
        out = (y - m) / np.sqrt(v + BN_EPSILON) * s + b
        self.nodes.append(helper.make_node("BatchNormalization", [x] + names, [name], name=name,
                                           epsilon=BN_EPSILON, momentum=0.9))
        self.value[name] = out
        return name

    def conv_bn_folded(self, x, out_channels, kernel, stride=1, pad=0, group=1):
        """Conv followed by a batch norm folded into its weights and bias, as exporters write an
        inference graph: a Conv with a B input."""
        in_channels = self.value[x].shape[1]
        shape = (out_channels, in_channels // group, kernel, kernel)
        w = self.conv_weights(shape)
        y = conv_np(self.value[x], w, None, (stride, stride), (pad,) * 4, group)
        scale, shift, mean, var = self.batch_norm_parameters(y)
        factor = scale / np.sqrt(var + BN_EPSILON)
        return self.conv(x, out_channels, kernel, stride, pad, group, weights=w * factor.reshape(-1, 1, 1, 1),
                         conv_bias=shift - mean * factor)

    def relu(self, x):
        return self.add_node("Relu", [x], np.maximum(self.value[x], 0.0))

    def relu6(self, x, low, high):
        return self.add_node("Clip", [x, low, high], np.clip(self.value[x], 0.0, 6.0), prefix="relu6")

    def sigmoid(self, x):
        return self.add_node("Sigmoid", [x], sigmoid_np(self.value[x]))

    def add(self, a, b):
        return self.add_node("Add", [a, b], self.value[a] + self.value[b])

    def mul(self, a, b):
        return self.add_node("Mul", [a, b], self.value[a] * self.value[b])

    def max_pool(self, x, kernel, stride, pad=0, ceil_mode=0):
        y = pool_np(self.value[x], "max", (kernel, kernel), (stride, stride), (pad,) * 4, ceil_mode=ceil_mode)
        attributes = {"ceil_mode": ceil_mode} if ceil_mode else {}
        return self.add_node("MaxPool", [x], y, kernel_shape=[kernel, kernel], strides=[stride, stride],
                             pads=[pad] * 4, **attributes)

    def average_pool(self, x, kernel, stride, pad=0, count_include_pad=0):
        y = pool_np(self.value[x], "avg", (kernel, kernel), (stride, stride), (pad,) * 4,
                    count_include_pad=count_include_pad)
        return self.add_node("AveragePool", [x], y, kernel_shape=[kernel, kernel], strides=[stride, stride],
                             pads=[pad] * 4, count_include_pad=count_include_pad)

    def global_average_pool(self, x):
        return self.add_node("GlobalAveragePool", [x], self.value[x].mean(axis=(2, 3), keepdims=True))

    def flatten(self, x, axis=1):
        v = self.value[x]
        return self.add_node("Flatten", [x], v.reshape(int(np.prod(v.shape[:axis])), -1), axis=axis)

    def classifier_weights(self, features, classes, spread):
        """Weights [classes, features] and a bias that give logits with a standard deviation of
        `spread` over the classes on this input."""
        f = self.value[features]
        w = self.he_weights((classes, f.shape[1]), f.shape[1], gain=1.0)
        b = self.rng.standard_normal(classes) * 0.1
        logits = f @ w.T + b
        factor = spread / logits.std()
        return w * factor, b * factor

    def gemm(self, x, classes, spread=2.0):
        w, b = self.classifier_weights(x, classes, spread)
        name = self.fresh("fc")
        wn, bn = self.add_initializer(name + ".weight", w), self.add_initializer(name + ".bias", b)
        y = self.value[x] @ self.value[wn].T + self.value[bn]
        self.nodes.append(helper.make_node("Gemm", [x, wn, bn], [name], name=name, alpha=1.0, beta=1.0, transB=1))
        self.value[name] = y
        return name

    def rename(self, old, new):
        """Names a value as a graph output is named (exporters: "logits", "probabilities")."""
        for node in self.nodes:
            node.input[:] = [new if n == old else n for n in node.input]
            node.output[:] = [new if n == old else n for n in node.output]
        self.value[new] = self.value.pop(old)
        return new

    # The model.

    def model(self, inputs, outputs, doc):
        """Makes self.onnx_model; inputs: [(name, dims, None for a symbolic batch)]; outputs:
        names of values. Returns the net."""
        self.graph_inputs, self.graph_outputs = [n for n, _ in inputs], outputs

        def info(name, dims):
            shape = [d if d is not None else "N" for d in dims]
            return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

        graph = helper.make_graph(self.nodes, self.name, [info(n, d) for n, d in inputs],
                                  [info(n, list(self.value[n].shape)) for n in outputs],
                                  initializer=self.initializers)
        graph.doc_string = doc
        model = helper.make_model(graph, producer_name="fluidk scripts/onnx/make_models.py",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 7  # what opset 13 came with (ONNX 1.8); ONNX Runtime takes it
        self.onnx_model = model
        return self


def new_net(name, seed, input_shape):
    net = Net(name, seed)
    x = np.random.RandomState(seed + 1000).standard_normal(input_shape)
    net.value["input"] = x.astype(np.float32).astype(np.float64)
    return net


def resnet18(batch=1):
    net = new_net("resnet18", 18, (batch, 3, 224, 224))

    def conv_bn(x, channels, kernel, stride, pad):
        return net.batch_norm(net.conv(x, channels, kernel, stride, pad, bias=False))

    x = net.relu(conv_bn("input", 64, 7, 2, 3))
    x = net.max_pool(x, 3, 2, pad=1)
    in_channels = 64
    for channels, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            y = net.relu(conv_bn(x, channels, 3, s, 1))
            y = conv_bn(y, channels, 3, 1, 1)
            shortcut = conv_bn(x, channels, 1, s, 0) if s != 1 or in_channels != channels else x
            x = net.relu(net.add(y, shortcut))
            in_channels = channels
    x = net.flatten(net.global_average_pool(x))
    logits = net.rename(net.gemm(x, 1000), "logits")
    return net.model([("input", [batch, 3, 224, 224])], [logits],
                     "ResNet-18 (He et al. 2015), torchvision's layout, inference graph")


def mobilenetv2(batch=1):
    net = new_net("mobilenetv2", 2, (batch, 3, 224, 224))
    # relu6's bounds: constant inputs of every Clip (opset 11 and later), one pair for all.
    low = net.add_initializer("relu6.min", np.array(0.0))
    high = net.add_initializer("relu6.max", np.array(6.0))

    x = net.relu6(net.conv_bn_folded("input", 32, 3, 2, 1), low, high)
    in_channels = 32
    for expansion, channels, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                                 (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(repeats):
            s = stride if i == 0 else 1
            hidden = in_channels * expansion
            y = x
            if expansion != 1:
                y = net.relu6(net.conv_bn_folded(y, hidden, 1), low, high)
            y = net.relu6(net.conv_bn_folded(y, hidden, 3, s, 1, group=hidden), low, high)
            y = net.conv_bn_folded(y, channels, 1)  # the linear bottleneck
            x = net.add(x, y) if s == 1 and in_channels == channels else y
            in_channels = channels
    x = net.relu6(net.conv_bn_folded(x, 1280, 1), low, high)
    x = net.global_average_pool(x)
    shape = net.add_initializer("flatten.shape", np.array([0, -1]), dtype=np.int64)
    v = net.value[x]
    x = net.add_node("Reshape", [x, shape], v.reshape(v.shape[0], -1))
    logits = net.rename(net.gemm(x, 1000), "logits")
    return net.model([("input", [batch, 3, 224, 224])], [logits],
                     "MobileNetV2 (Sandler et al. 2018), torchvision's layout, batch norm folded into the convolutions")


def squeezenet11(batch=1):
    net = new_net("squeezenet11", 11, (batch, 3, 224, 224))

    def fire(x, squeeze, expand):
        s = net.relu(net.conv(x, squeeze, 1))
        e1 = net.relu(net.conv(s, expand, 1))
        e3 = net.relu(net.conv(s, expand, 3, pad=1))
        return net.add_node("Concat", [e1, e3], np.concatenate([net.value[e1], net.value[e3]], axis=1), axis=1)

    x = net.relu(net.conv("input", 64, 3, 2))
    x = net.max_pool(x, 3, 2, ceil_mode=1)
    x = fire(fire(x, 16, 64), 16, 64)
    x = net.max_pool(x, 3, 2, ceil_mode=1)
    x = fire(fire(x, 32, 128), 32, 128)
    x = net.max_pool(x, 3, 2, ceil_mode=1)
    for squeeze, expand in ((48, 192), (48, 192), (64, 256), (64, 256)):
        x = fire(x, squeeze, expand)
    x = net.add_node("Dropout", [x], net.value[x])  # ratio 0.5, inference: the identity
    # The final 1x1 convolution: its output, after relu and the average pool, are the logits.
    features = net.value[x]
    w = net.he_weights((1000, features.shape[1], 1, 1), features.shape[1])
    raw = conv_np(features, w, None, (1, 1), (0,) * 4, 1).mean(axis=(2, 3))
    w *= 1.5 / raw.std()
    x = net.relu(net.conv(x, 1000, 1, conv_bias=net.rng.uniform(0.0, 0.5, 1000), weights=w))
    x = net.average_pool(x, 13, 1)
    x = net.flatten(x)
    probabilities = net.rename(net.add_node("Softmax", [x], softmax_np(net.value[x], 1), axis=1), "probabilities")
    return net.model([("input", [batch, 3, 224, 224])], [probabilities],
                     "SqueezeNet 1.1 (Iandola et al. 2016), torchvision's layout")


def cifar(batch=4):
    """A small net at batch 4 with a symbolic batch dimension, two outputs (one of them also
    read by a node), a Constant node, and pools whose padding matters."""
    net = new_net("cifar", 10, (batch, 3, 32, 32))
    x = net.relu(net.batch_norm(net.conv("input", 16, 3, pad=1)))
    x = net.max_pool(x, 3, 2, ceil_mode=1)  # 32 -> 16 only with ceil_mode
    x = net.relu(net.batch_norm(net.conv(x, 32, 3, pad=1)))
    x = net.average_pool(x, 3, 2, pad=1, count_include_pad=1)  # 16 -> 8
    gate = net.sigmoid(net.conv(x, 32, 1))
    x = net.mul(x, gate)
    x = net.average_pool(x, 3, 2, pad=1, count_include_pad=0)  # 8 -> 4
    x = net.flatten(x)
    w, b = net.classifier_weights(x, 10, 2.0)
    weights = net.add_initializer("classifier.weight", w.T)  # [features, classes], for MatMul
    product = net.add_node("MatMul", [x, weights], net.value[x] @ net.value[weights])
    bias = net.fresh("classifier_bias")
    b32 = b.astype(np.float32)
    net.nodes.append(helper.make_node("Constant", [], [bias], name=bias,
                                      value=numpy_helper.from_array(b32, name=bias)))
    net.value[bias] = b32.astype(np.float64)
    logits = net.rename(net.add(product, bias), "logits")
    probabilities = net.add_node("Softmax", [logits], softmax_np(net.value[logits], -1))
    output = net.rename(net.add_node("Identity", [probabilities], net.value[probabilities]), "probabilities")
    return net.model([("input", [None, 3, 32, 32])], [output, logits],
                     "A CIFAR-sized net: conv, batch norm, pools, a sigmoid gate, MatMul, Softmax")


MODELS = {"resnet18": resnet18, "mobilenetv2": mobilenetv2, "squeezenet11": squeezenet11, "cifar": cifar}


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    args, batch = argv[1:], None  # None: each model's own batch (4 for cifar, else 1)
    if args[0] == "--batch":
        if len(args) < 3 or not args[1].isdigit() or int(args[1]) < 1:
            print("make_models.py: --batch takes a positive integer and comes before DIR", file=sys.stderr)
            return 2
        batch, args = int(args[1]), args[2:]
    directory, names = args[0], args[1:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            print(f"make_models.py: no model '{name}' (models: {' '.join(MODELS)})", file=sys.stderr)
            return 2
    for name in names:
        net = MODELS[name]() if batch is None else MODELS[name](batch)
        model = net.onnx_model
        onnx.checker.check_model(model, full_check=True)  # full_check: shape inference, strictly
        path = os.path.join(directory, name)
        data = os.path.join(path, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        onnx.save(model, os.path.join(path, "model.onnx"))
        for k, input_name in enumerate(net.graph_inputs):
            tensor = numpy_helper.from_array(net.value[input_name].astype(np.float32), name=input_name)
            with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
                f.write(tensor.SerializeToString())
        for k, output_name in enumerate(net.graph_outputs):
            np.save(os.path.join(path, f"numpy_output_{k}.npy"), net.value[output_name])
        summary = "; ".join(f"{o} {list(net.value[o].shape)} mean {net.value[o].mean():.3g} "
                            f"std {net.value[o].std():.3g} max {net.value[o].max():.3g}"
                            for o in net.graph_outputs)
        weights = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        print(f"{name}: {len(model.graph.node)} nodes, {weights / 1e6:.2f} M weights; {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
