#!/usr/bin/python3
"""Compares two safetensors models tensor by tensor: the same names, shapes
and dtypes, and every element within an absolute plus relative tolerance
(|a - b| <= atol + rtol * |b|, numpy.isclose). Prints each tensor's largest
difference. scripts/cross-test uses it on the models an aarch64 and an
x86-64 federation committed.

    /usr/bin/python3 scripts/safetensors_compare.py A B --atol 1e-4 --rtol 1e-3

Exit status: 0 equal within the tolerance, 1 not, 2 a file is not valid.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_read import BadFile, read  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--atol", type=float, default=0.0)
    ap.add_argument("--rtol", type=float, default=0.0)
    args = ap.parse_args()
    try:
        ta, _ = read(args.a)
        tb, _ = read(args.b)
    except (OSError, ValueError, KeyError, BadFile) as e:
        print(f"safetensors_compare: {e}", file=sys.stderr)
        return 2
    if sorted(ta) != sorted(tb):
        print(f"tensor names differ: {sorted(ta)} vs {sorted(tb)}")
        return 1
    ok = True
    for name in sorted(ta):
        a, b = ta[name], tb[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
            ok = False
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        diff = np.abs(a64 - b64)
        close = np.isclose(a64, b64, rtol=args.rtol, atol=args.atol)
        bad = int(a.size - np.count_nonzero(close))
        print(f"{name}: {a.size} values, max |diff| {diff.max(initial=0):.3g}, "
              f"max |value| {np.abs(b64).max(initial=0):.3g}, "
              f"{np.count_nonzero(diff)} differ, {bad} beyond tolerance")
        ok = ok and bad == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
