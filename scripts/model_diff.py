#!/usr/bin/python3
"""Compares two models Cohort wrote as safetensors (cohort-server --export)
element by element: the same tensors, shapes and dtypes, and every value
within --tol of the reference's. Prints, per tensor and over all, the
largest absolute difference and the largest |value| of the reference, so a
report can state how far apart two runs of one federation ended.

    /usr/bin/python3 scripts/model_diff.py ref.safetensors other.safetensors \
        --tol 1e-5

Exit status: 0 within --tol, 1 a value, a name or a shape differs beyond
it, 2 a file is not valid. scripts/cross-test uses it to hold the aarch64
federation's model to the x86-64 one's.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import BadFile, read  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("other")
    ap.add_argument("--tol", type=float, required=True,
                    help="largest absolute difference allowed per value")
    args = ap.parse_args()

    models = []
    for path in (args.ref, args.other):
        try:
            models.append(read(path)[0])
        except (OSError, ValueError, KeyError, TypeError, BadFile) as e:
            print(f"{path}: not a valid safetensors file: {e}", file=sys.stderr)
            return 2
    ref, other = models
    if set(ref) != set(other):
        print(f"FAIL: tensors {sorted(ref)} against {sorted(other)}",
              file=sys.stderr)
        return 1

    worst, biggest, failed = 0.0, 0.0, False
    for name, a in ref.items():
        b = other[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"FAIL: {name}: {a.dtype}{a.shape} against {b.dtype}{b.shape}",
                  file=sys.stderr)
            failed = True
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
            print(f"FAIL: {name}: a value is not finite", file=sys.stderr)
            failed = True
            continue
        diff = float(np.abs(a64 - b64).max()) if a.size else 0.0
        big = float(np.abs(a64).max()) if a.size else 0.0
        equal = int((a.view(np.uint8) == b.view(np.uint8)).reshape(
            a.size, -1).all(axis=1).sum()) if a.size else 0
        print(f"{name:24} {str(a.shape):16} max |diff| {diff:.3g}  "
              f"max |ref| {big:.3g}  bit-equal {equal}/{a.size}")
        worst, biggest = max(worst, diff), max(biggest, big)
        if diff > args.tol:
            failed = True
    print(f"all tensors: max |diff| {worst:.3g} (tolerance {args.tol:.3g}), "
          f"max |ref| {biggest:.3g}")
    if failed:
        print("FAIL: the models differ beyond the tolerance", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
