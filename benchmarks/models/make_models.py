#!/usr/bin/env python3
"""The model blocks kiln is measured on against ONNX Runtime, written as ONNX files the way
exporters write them (opset 17, seeded weights, a dynamic batch): a BERT-base encoder layer with
an attention mask (batch and sequence length dynamic, heads split by Shape subgraphs), an MLP
(tokens x 1024 -> 4096 -> 1024, the benchmark's 256 tokens), two ResNet-50 bottleneck blocks, a MobileNetV3-small-style block
(depthwise convolutions, squeeze-excite, hard-swish) and a GPT-2-small-style decoder step with
past keys and values (two layers, a 2048-token vocabulary).

Usage: make_models.py OUT_DIR   (writes OUT_DIR/<name>.onnx; Debian's python3-onnx, numpy)
"""
import sys
import warnings

import numpy as np

# python3-onnx 1.12's helpers use numpy aliases that newer numpy removed.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for alias, real in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if not hasattr(np, alias):
            setattr(np, alias, real)

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 17


class Builder:
    """Nodes, initializers and value names for one graph; weights drawn from one seed."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def weight(self, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        data = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(data, n))
        return n

    def const(self, values, dtype=np.float32):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), n))
        return n

    def op(self, kind, inputs, **attrs):
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8  # what opset 17 needs; a newer onnx writes a later one, which Debian's
                          # libonnx checker (1.12) refuses
        onnx.checker.check_model(m)
        return m


def dense(b, x, n_in, n_out):
    return b.op("Add", [b.op("MatMul", [x, b.weight([n_in, n_out])]), b.weight([n_out], 0.02)])


def layer_norm(b, x, width):
    return b.op("LayerNormalization", [x, b.const(np.ones(width)), b.const(np.zeros(width))],
                axis=-1, epsilon=1e-12)


def gelu(b, x):  # erf form, as PyTorch exports nn.GELU
    inner = b.op("Erf", [b.op("Div", [x, b.const(np.sqrt(2.0))])])
    return b.op("Mul", [b.op("Mul", [x, b.op("Add", [inner, b.const(1.0)])]), b.const(0.5)])


def shape_pieces(b, t):
    """[batch] and [seq] of t [batch, seq, ...] as exporters compute them (Shape, Gather,
    Unsqueeze): run-time sizes where the model leaves them open."""
    shape = b.op("Shape", [t])
    return [b.op("Unsqueeze", [b.op("Gather", [shape, b.const(i, np.int64)], axis=0),
                               b.const([0], np.int64)]) for i in (0, 1)]


def attention(b, q, k, v, additive, head, pieces, width):
    """Softmax(q k' / sqrt(head) + additive) v over [B, H, S, D], merged back to [B, S, W]."""
    scores = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                          b.const(np.sqrt(head))])
    probs = b.op("Softmax", [b.op("Add", [scores, additive])], axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.op("Concat", pieces + [b.const([width], np.int64)], axis=0)
    return b.op("Reshape", [context, merged])


def bert_layer(seq="seq", width=768, heads=12, hidden=3072):
    """One encoder layer: self-attention with an additive mask from a [batch, seq] 0/1 mask."""
    b = Builder(1)
    head = width // heads
    x, mask = "hidden_states", "attention_mask"
    pieces = shape_pieces(b, x)
    split = b.op("Concat", pieces + [b.const([heads, head], np.int64)], axis=0)

    def split_heads(t):  # [B, S, W] -> [B, H, S, D]
        return b.op("Transpose", [b.op("Reshape", [t, split])], perm=[0, 2, 1, 3])

    q = split_heads(dense(b, x, width, width))
    k = split_heads(dense(b, x, width, width))
    v = split_heads(dense(b, x, width, width))
    # (1 - mask) * -10000, broadcast over heads and query rows: [B, 1, 1, S]
    m = b.op("Unsqueeze", [b.op("Cast", [mask], to=TensorProto.FLOAT), b.const([1, 2], np.int64)])
    additive = b.op("Mul", [b.op("Sub", [b.const(1.0), m]), b.const(-10000.0)])
    context = attention(b, q, k, v, additive, head, pieces, width)
    attn = layer_norm(b, b.op("Add", [dense(b, context, width, width), x]), width)
    ffn = dense(b, gelu(b, dense(b, attn, width, hidden)), hidden, width)
    out = layer_norm(b, b.op("Add", [ffn, attn]), width)
    b.nodes[-1].output[0] = "output"
    return b.model(
        "bert_layer",
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", seq, width]),
         helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", seq])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", seq, width])])


def gpt2_step(layers=2, width=768, heads=12, vocab=2048, positions=1024):
    """A decoder step with a cache, as exporters write GPT-2: token ids [batch, seq], position ids
    counted in the graph (Range(past, past + seq), as an export without position_ids computes
    them), each layer's past keys and values [batch, heads, past, 64] in and the grown ones (a
    Concat along the sequence: past + seq) out, a 0/1 attention mask [batch, total] widened by
    Expand to [batch, 1, 1, past + seq] (an Add of run-time sizes) plus the causal mask cut from
    a static triangle at run-time positions, pre-norm blocks, tied output embedding."""
    b = Builder(5)
    head = width // heads
    wte = b.weight([vocab, width], 0.02)
    tokens = b.op("Gather", [wte, "input_ids"], axis=0)
    pieces = shape_pieces(b, tokens)
    split = b.op("Concat", pieces + [b.const([heads, head], np.int64)], axis=0)
    past_len = b.op("Gather", [b.op("Shape", ["past_key_values.0.key"]), b.const(2, np.int64)],
                    axis=0)
    key_len = b.op("Add", [past_len, b.op("Squeeze", [pieces[1], b.const([0], np.int64)])])
    position_ids = b.op("Unsqueeze", [b.op("Range", [past_len, key_len, b.const(1, np.int64)]),
                                      b.const([0], np.int64)])
    h = b.op("Add", [tokens, b.op("Gather", [b.weight([positions, width], 0.01), position_ids],
                                  axis=0)])
    mask_shape = b.op("Concat", [pieces[0], b.const([1, 1], np.int64),
                                 b.op("Unsqueeze", [key_len, b.const([0], np.int64)])], axis=0)
    m = b.op("Unsqueeze", [b.op("Cast", ["attention_mask"], to=TensorProto.FLOAT),
                           b.const([1, 2], np.int64)])
    padding = b.op("Expand", [b.op("Mul", [b.op("Sub", [b.const(1.0), m]), b.const(-10000.0)]),
                              mask_shape])
    # GPT-2's causal mask: rows [past, past + seq) and columns [0, past + seq) cut from a static
    # lower triangle by Slices at run-time positions.
    triangle = b.const(np.tril(np.ones((1, 1, positions, positions))))
    new_len = b.op("Squeeze", [pieces[1], b.const([0], np.int64)])
    key_end = b.op("Unsqueeze", [key_len, b.const([0], np.int64)])
    rows = b.op("Slice", [triangle, b.op("Unsqueeze", [b.op("Sub", [key_len, new_len]),
                                                       b.const([0], np.int64)]),
                          key_end, b.const([2], np.int64)])
    causal = b.op("Slice", [rows, b.const([0], np.int64), key_end, b.const([3], np.int64)])
    additive = b.op("Add", [padding, b.op("Mul", [b.op("Sub", [b.const(1.0), causal]),
                                                  b.const(-10000.0)])])
    cache_in, cache_out = [], []
    for layer in range(layers):
        a = layer_norm(b, h, width)
        qkv = [b.name(part) for part in ("q", "k", "v")]
        b.nodes.append(helper.make_node("Split", [dense(b, a, width, 3 * width),
                                                  b.const([width] * 3, np.int64)], qkv, axis=2))
        q, k, v = (b.op("Transpose", [b.op("Reshape", [t, split])], perm=[0, 2, 1, 3])
                   for t in qkv)
        grown = []
        for kind, new in (("key", k), ("value", v)):
            past, present = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
            b.nodes.append(helper.make_node("Concat", [past, new], [present], axis=2))
            cache_in.append(helper.make_tensor_value_info(
                past, TensorProto.FLOAT, ["batch", heads, "past", head]))
            cache_out.append(helper.make_tensor_value_info(
                present, TensorProto.FLOAT, ["batch", heads, "past + seq", head]))
            grown.append(present)
        context = attention(b, q, grown[0], grown[1], additive, head, pieces, width)
        h = b.op("Add", [h, dense(b, context, width, width)])
        f = dense(b, layer_norm(b, h, width), width, 4 * width)
        # GPT-2's tanh form of GELU
        cube = b.op("Mul", [f, b.op("Mul", [f, f])])
        inner = b.op("Mul", [b.op("Add", [f, b.op("Mul", [cube, b.const(0.044715)])]),
                             b.const(np.sqrt(2.0 / np.pi))])
        f = b.op("Mul", [b.op("Mul", [f, b.const(0.5)]),
                         b.op("Add", [b.op("Tanh", [inner]), b.const(1.0)])])
        h = b.op("Add", [h, dense(b, f, 4 * width, width)])
    b.nodes.append(helper.make_node("MatMul", [layer_norm(b, h, width),
                                               b.op("Transpose", [wte], perm=[1, 0])], ["logits"]))
    ids = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.INT64, dims)  # noqa: E731
    return b.model(
        "gpt2_step",
        [ids("input_ids", ["batch", "seq"]), ids("attention_mask", ["batch", "total"])] + cache_in,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])] +
        cache_out)


def mlp(tokens="tokens", width=1024, hidden=4096):
    b = Builder(2)
    h = b.op("Relu", [dense(b, "x", width, hidden)])
    dense(b, h, hidden, width)
    b.nodes[-1].output[0] = "y"
    return b.model("mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, width])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, width])])


def conv(b, x, c_in, c_out, k, stride=1, group=1):
    w = b.weight([c_out, c_in // group, k, k])
    return b.op("Conv", [x, w, b.weight([c_out], 0.02)], kernel_shape=[k, k],
                strides=[stride, stride], pads=[k // 2] * 4, group=group)


def resnet_stages(size=56):
    """Two ResNet-50 bottleneck blocks of the first stage (256 channels, 64 inside)."""
    b = Builder(3)
    x = "x"
    for _ in range(2):
        y = b.op("Relu", [conv(b, x, 256, 64, 1)])
        y = b.op("Relu", [conv(b, y, 64, 64, 3)])
        y = conv(b, y, 64, 256, 1)
        x = b.op("Relu", [b.op("Add", [y, x])])
    b.nodes[-1].output[0] = "y"
    return b.model("resnet_stages",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 256, size, size])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256, size, size])])


def mobilenet_block(height=224, width=224):
    """A MobileNetV3-small-style head: stem, an inverted residual with squeeze-excite, pooling and
    a classifier, hard-swish between."""
    b = Builder(4)
    hswish = lambda t: b.op("HardSwish", [t])  # noqa: E731
    x = hswish(conv(b, "x", 3, 16, 3, stride=2))
    y = hswish(conv(b, x, 16, 72, 1))
    y = hswish(conv(b, y, 72, 72, 3, stride=2, group=72))  # depthwise
    s = b.op("GlobalAveragePool", [y])
    s = b.op("HardSigmoid", [conv(b, b.op("Relu", [conv(b, s, 72, 24, 1)]), 24, 72, 1)],
             alpha=1.0 / 6, beta=0.5)
    y = b.op("Mul", [y, s])
    y = conv(b, y, 72, 24, 1)
    y = hswish(conv(b, y, 24, 96, 1))
    p = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    dense(b, p, 96, 1000)
    b.nodes[-1].output[0] = "logits"
    return b.model(f"mobilenet_{height}x{width}",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, height, width])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])])


def detector(size=96, classes=3, limit=20):
    """A single-shot detector's head: a strided conv backbone, per-cell boxes (a grid of anchors
    moved by a 1x1 conv) and class scores, NonMaxSuppression, and the kept boxes gathered: the
    boxes' count is known only at the call."""
    b = Builder(5)
    x = b.op("Relu", [conv(b, "x", 3, 16, 3, stride=2)])
    x = b.op("Relu", [conv(b, x, 16, 32, 3, stride=2)])
    cells = (size // 4) ** 2
    grid = size // 4
    anchors = np.array([[(r + 0.5) / grid - 0.06, (c + 0.5) / grid - 0.06,
                         (r + 0.5) / grid + 0.06, (c + 0.5) / grid + 0.06]
                        for r in range(grid) for c in range(grid)], dtype=np.float32)[None]
    deltas = b.op("Transpose", [b.op("Reshape", [conv(b, x, 32, 4, 1), b.const([1, 4, cells],
                                                                              np.int64)])],
                  perm=[0, 2, 1])
    boxes = b.op("Add", [b.const(anchors), b.op("Mul", [deltas, b.const(0.02)])])
    # A prior per cell and class spreads the scores: ones a float rounding apart would leave
    # NMS's order (and which boxes it keeps) to chance.
    logits = b.op("Reshape", [conv(b, x, 32, classes, 1), b.const([1, classes, cells], np.int64)])
    scores = b.op("Sigmoid", [b.op("Add", [logits, b.weight([1, classes, cells], 1.0)])])
    selected = b.op("NonMaxSuppression", [boxes, scores, b.const(limit, np.int64),
                                          b.const(0.3), b.const(0.5)])
    which = b.op("Gather", [selected, b.const(2, np.int64)], axis=1)
    b.op("Gather", [b.op("Squeeze", [boxes, b.const([0], np.int64)]), which])
    b.nodes[-1].output[0] = "kept_boxes"
    b.op("GatherND", [scores, selected])
    b.nodes[-1].output[0] = "kept_scores"
    b.nodes.append(helper.make_node("Identity", [selected], ["selected"]))
    f32 = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)  # noqa: E731
    return b.model("detector", [f32("x", [1, 3, size, size])],
                   [f32("kept_boxes", ["k", 4]), f32("kept_scores", ["k"]),
                    helper.make_tensor_value_info("selected", TensorProto.INT64, ["k", 3])])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    models = {"bert_layer": bert_layer(), "mlp": mlp(), "resnet_stages": resnet_stages(),
              "mobilenet_224": mobilenet_block(), "mobilenet_48x192": mobilenet_block(48, 192),
              "gpt2_step": gpt2_step(), "detector": detector()}
    for name, m in models.items():
        onnx.save(m, f"{out}/{name}.onnx")
        print(f"{out}/{name}.onnx: {len(m.graph.node)} nodes, "
              f"{sum(np.prod(t.dims) for t in m.graph.initializer) / 1e6:.1f} M weights")


if __name__ == "__main__":
    main()
