#!/usr/bin/python3
"""Writes the safetensors fixtures of test_safetensors with numpy, json and
struct only (no safetensors package), the way the reference writer lays a
file out: tensors sorted by name, the header padded with spaces to a multiple
of 8 bytes. Regenerate with:

    /usr/bin/python3 scripts/safetensors_fixture.py tests/fixtures

numpy_f32.safetensors  F32 tensors with known values plus metadata; the
                       test checks every value exactly.
numpy_f16.safetensors  one F16 tensor 'w', which Cohort must refuse by name.
"""
import json
import os
import struct
import sys

import numpy as np

DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f2"): "F16"}


def write(path, tensors, metadata=None):
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    chunks, at = [], 0
    for name in sorted(tensors):
        a = np.array(tensors[name], order="C")  # keeps 0-d arrays 0-d
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        raw = a.tobytes()
        header[name] = {
            "dtype": DTYPES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [at, at + len(raw)],
        }
        chunks.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    f32 = {
        # 0, 1/8, ..., 11/8: exact in float32.
        "fc.weight": (np.arange(12, dtype=np.float32) / 8).reshape(3, 4),
        "fc.bias": np.array([-1.5, 0.0, 2.25], dtype=np.float32),
        # A conv weight, out x in x kh x kw: (i - 12) / 4.
        "conv.weight": ((np.arange(24, dtype=np.float32) - 12) / 4).reshape(
            2, 3, 2, 2),
        "temperature": np.array(0.75, dtype=np.float32),  # shape []
        "unused": np.zeros((0, 5), dtype=np.float32),
    }
    write(os.path.join(out, "numpy_f32.safetensors"), f32,
          {"format": "np", "written_by": "scripts/safetensors_fixture.py"})
    f16 = {"w": (np.arange(6, dtype=np.float16) / 4).reshape(2, 3)}
    write(os.path.join(out, "numpy_f16.safetensors"), f16)


if __name__ == "__main__":
    main()
