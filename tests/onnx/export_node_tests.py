#!/usr/bin/python3
"""Writes ONNX's backend node tests for the ops kiln implements as a line-based text file that the
C++ harness (test_onnx_nodes.cpp) reads: Debian's python3-onnx carries the test cases as Python
generators (onnx/backend/test/case/node), which need numpy's old aliases."""
import sys

import numpy as np

for alias, kind in [("float", float), ("int", int), ("bool", bool), ("object", object),
                    ("complex", complex)]:
    if alias not in np.__dict__:
        setattr(np, alias, kind)

from onnx import helper  # noqa: E402
from onnx.backend.test.case import node as node_cases  # noqa: E402

OPS = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
       "ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin", "Softmax", "LogSoftmax",
       "LayerNormalization", "Transpose", "Reshape", "Expand", "Slice", "Flatten", "Squeeze",
       "Unsqueeze", "BatchNormalization", "InstanceNormalization", "Split", "Tile",
       "DepthToSpace", "SpaceToDepth", "Range", "Gather", "GatherElements", "Pad", "Concat",
       "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool", "MatMul", "Gemm",
       "Conv", "ConvTranspose", "MatMulInteger"}
DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "int8": "i8", "int16": "i16",
          "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool"}


def value_text(v, floating):
    if not floating:
        return str(int(v))
    v = float(v)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v.hex()


def tensor_lines(kind, index, array):
    array = np.asarray(array)
    name = DTYPES.get(str(array.dtype))
    if name is None:
        return None
    floating = array.dtype.kind == "f"
    values = " ".join(value_text(v, floating) for v in array.reshape(-1))
    dims = " ".join(str(d) for d in array.shape)
    return f"tensor {kind} {index} {name} {array.ndim} {dims} {array.size} {values}".replace("  ", " ")


def main(path):
    cases = node_cases.collect_testcases("")
    written = 0
    with open(path, "w") as out:
        for case in cases:
            nodes = case.model.graph.node
            if len(nodes) != 1 or nodes[0].op_type not in OPS:
                continue
            node = nodes[0]
            lines = [f"case {case.name} {node.op_type}"]
            for attr in node.attribute:
                value = helper.get_attribute_value(attr)
                if isinstance(value, int):
                    lines.append(f"attr {attr.name} i {value}")
                elif isinstance(value, bytes) and value.replace(b"_", b"").isalnum():
                    lines.append(f"attr {attr.name} s {value.decode()}")
                elif isinstance(value, float):
                    lines.append(f"attr {attr.name} f {float(value).hex()}")
                elif isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
                    lines.append(f"attr {attr.name} is {len(value)} " +
                                 " ".join(str(v) for v in value))
                else:
                    lines = None
                    break
            for inputs, outputs in case.data_sets if lines else []:
                present = [i for i, name in enumerate(node.input) if name]
                for index, array in zip(present, inputs):
                    line = tensor_lines("in", index, array)
                    lines = lines + [line] if lines and line else None
                for index, array in enumerate(outputs):
                    line = tensor_lines("out", index, array)
                    lines = lines + [line] if lines and line else None
                break  # the first data set
            if not lines:
                continue
            out.write("\n".join(lines) + "\nend\n")
            written += 1
    print(f"{written} ONNX node tests written to {path}")


if __name__ == "__main__":
    main(sys.argv[1])
