#!/usr/bin/python3
"""Reads a safetensors file with numpy alone (the header is parsed here),
prints each tensor's name, dtype, shape and sum, and optionally checks them;
shows that a model Cohort wrote opens in ordinary Python tooling. When the
`safetensors` package is importable, safetensors.numpy.load_file reads the
file too and the two must agree.

    /usr/bin/python3 scripts/safetensors_read.py model.safetensors
    ... --json                          one JSON object on stdout
    ... --expect-sum fc1.weight=8.25    sum within --tol (default 1e-6)
    ... --expect-shape fc1.weight=3x4   ("" or "scalar" for shape [])
    ... --expect-meta round=12          a __metadata__ entry

Exit status: 0 all good, 1 a check failed, 2 the file is not valid.
"""
import argparse
import json
import struct
import sys

import numpy as np

DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
}


class BadFile(Exception):
    pass


def read(path):
    """Returns ({name: ndarray}, metadata), in the order of the data."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise BadFile("shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n == 0 or n > 100_000_000 or 8 + n > len(blob):
        raise BadFile(f"bad header length {n}")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise BadFile("header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    data = blob[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    tensors, at = {}, 0
    for name, e in entries:
        begin, end = e["data_offsets"]
        if begin != at:
            raise BadFile(f"tensor {name!r}: data does not start at byte {at}")
        shape = tuple(e["shape"])
        if e["dtype"] == "BF16":  # numpy has no bfloat16: widen to float32
            u16 = np.frombuffer(data[begin:end], dtype="<u2")
            a = (u16.astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] in DTYPES:
            a = np.frombuffer(data[begin:end], dtype=DTYPES[e["dtype"]])
        else:
            raise BadFile(f"tensor {name!r}: unknown dtype {e['dtype']}")
        if a.size != int(np.prod(shape, dtype=np.int64)):
            raise BadFile(f"tensor {name!r}: {end - begin} bytes for shape {shape}")
        tensors[name] = a.reshape(shape)
        at = end
    if at != len(data):
        raise BadFile(f"{len(data) - at} bytes after the last tensor")
    return tensors, meta


def cross_check(path, tensors):
    """Compares with the safetensors package when it is installed."""
    try:
        from safetensors.numpy import load_file
    except ImportError:
        return None
    theirs = load_file(path)
    if set(theirs) != set(tensors):
        return f"safetensors.numpy sees tensors {sorted(theirs)}"
    for name, a in tensors.items():
        b = theirs[name]
        if a.shape != b.shape or a.tobytes() != np.ascontiguousarray(b).tobytes():
            return f"safetensors.numpy disagrees on {name!r}"
    return "agrees"


def pairs(items, what):
    out = {}
    for it in items or []:
        if "=" not in it:
            sys.exit(f"--expect-{what} wants NAME=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = v
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--expect-sum", action="append", metavar="NAME=VALUE")
    ap.add_argument("--expect-shape", action="append", metavar="NAME=AxB")
    ap.add_argument("--expect-meta", action="append", metavar="KEY=VALUE")
    ap.add_argument("--tol", type=float, default=1e-6,
                    help="relative tolerance of --expect-sum")
    args = ap.parse_args()

    try:
        tensors, meta = read(args.path)
    except (OSError, ValueError, KeyError, TypeError, BadFile) as e:
        print(f"{args.path}: not a valid safetensors file: {e}", file=sys.stderr)
        return 2
    agree = cross_check(args.path, tensors)

    report = {
        "metadata": meta,
        "safetensors_package": agree or "not installed",
        "tensors": [
            {"name": k, "dtype": str(a.dtype), "shape": list(a.shape),
             "sum": float(a.astype(np.float64).sum())}
            for k, a in tensors.items()
        ],
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for t in report["tensors"]:
            print(f"{t['name']:24} {t['dtype']:8} {str(tuple(t['shape'])):16} "
                  f"sum {t['sum']:.9g}")
        for k, v in meta.items():
            print(f"metadata {k} = {v}")
        print(f"safetensors package: {report['safetensors_package']}")

    failed = []
    if agree not in (None, "agrees"):
        failed.append(agree)
    for name, want in pairs(args.expect_sum, "sum").items():
        if name not in tensors:
            failed.append(f"no tensor {name!r}")
            continue
        got = float(tensors[name].astype(np.float64).sum())
        if abs(got - float(want)) > args.tol * max(1.0, abs(float(want))):
            failed.append(f"{name}: sum {got!r}, expected {want}")
    for name, want in pairs(args.expect_shape, "shape").items():
        shape = () if want in ("", "scalar") else tuple(
            int(d) for d in want.split("x"))
        if name not in tensors or tensors[name].shape != shape:
            got = tensors[name].shape if name in tensors else "missing"
            failed.append(f"{name}: shape {got}, expected {shape}")
    for key, want in pairs(args.expect_meta, "meta").items():
        if meta.get(key) != want:
            failed.append(f"metadata {key}: {meta.get(key)!r}, expected {want!r}")
    for f in failed:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
