#!/usr/bin/env python3
"""Turns a dynamically quantized BERT ONNX export back into float32 safetensors.

    python3 convert-onnx-bert.py MODEL.onnx OUT_DIR

ONNX Runtime's dynamic quantization stores each linear layer's weight as 8-bit integers
with one scale and zero point (MatMulInteger) and each embedding table the same way
(DequantizeLinear). This script multiplies them back out, (q - zero_point) * scale,
transposes the ONNX [in, out] matrices to torch's [out, in] and writes every tensor under
its Hugging Face name, so candle's BERT loads the file as it loads any BERT checkpoint.
The weights are those of the quantized model: 8-bit values scaled back, not the original
float32 checkpoint.

Needs the `onnx` and `numpy` packages; writes OUT_DIR/model.safetensors only.
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def hf_name_of_matmul(node_name):
    # "/bert/encoder/layer.0/attention/self/query/MatMul_quant"
    #   -> "bert.encoder.layer.0.attention.self.query.weight"
    parts = node_name.strip("/").split("/")
    return ".".join(parts[:-1]) + ".weight"


def main(model_path, out_dir):
    graph = onnx.load(model_path).graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    tensors = {}

    def dequantized(base):
        q = inits[base + "_quantized"].astype(np.float32)
        zero = inits[base + "_zero_point"].astype(np.float32)
        return (q - zero) * inits[base + "_scale"].astype(np.float32)

    for node in graph.node:
        if node.op_type == "MatMulInteger":
            weight = node.input[1]
            if not weight.endswith("_quantized"):
                sys.exit(f"{node.name}: weight {weight} is not a quantized initializer")
            base = weight[: -len("_quantized")]
            name = base if base.endswith(".weight") else hf_name_of_matmul(node.name)
            tensors[name] = np.ascontiguousarray(dequantized(base).T)
        elif node.op_type == "DequantizeLinear" and node.input[1].endswith("_scale"):
            base = node.input[1][: -len("_scale")]
            if base + "_quantized" in inits:
                tensors[base] = dequantized(base)
    for name, array in inits.items():
        if name.endswith((".bias", "LayerNorm.weight")) and array.dtype == np.float32:
            tensors[name] = array

    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)
    print(f"{len(tensors)} tensors", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
