#!/usr/bin/env bash
# Writes a model with Cohort's saver (safetensors_sample) and reads it back
# in Python with numpy alone (scripts/safetensors_read.py), checking names,
# shapes, sums and metadata. Skipped (77) when Debian's python3 has no numpy;
# scripts/setup installs python3-numpy.
set -euo pipefail
sample=$1
src=$2
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: $py cannot import numpy (apt-get install python3-numpy)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$sample" "$tmp/model.safetensors" "$tmp/zoo.safetensors"
# A zoo model written by nn_model_save: names, shapes and the metadata that
# says how to rebuild it.
"$py" "$src/scripts/safetensors_read.py" "$tmp/zoo.safetensors" \
  --expect-shape fc1.weight=3x4 --expect-sum fc1.weight=33 \
  --expect-shape fc1.bias=3 --expect-sum fc1.bias=19.5 \
  --expect-shape fc2.weight=2x3 --expect-sum fc2.weight=52.5 \
  --expect-shape fc2.bias=2 --expect-sum fc2.bias=21.5 \
  --expect-meta format=cohort --expect-meta model_spec=mlp:3 \
  --expect-meta input_hwc=2x2x1 --expect-meta classes=2 --expect-meta round=3
"$py" "$src/scripts/safetensors_read.py" "$tmp/model.safetensors" \
  --expect-sum fc1.weight=8.25 --expect-shape fc1.weight=3x4 \
  --expect-sum conv1.weight=-4.5 --expect-shape conv1.weight=2x1x3x3 \
  --expect-sum fc1.bias=2.75 --expect-shape fc1.bias=4 \
  --expect-sum step=7 --expect-shape step=scalar \
  --expect-sum empty=0 --expect-shape empty=0 \
  --expect-meta cohort.model=mlp:4 --expect-meta round=12

# Exactly these tensors, in the order they were written.
names=$("$py" "$src/scripts/safetensors_read.py" --json "$tmp/model.safetensors" |
  "$py" -c 'import json, sys; print(",".join(t["name"] for t in json.load(sys.stdin)["tensors"]))')
want="fc1.weight,conv1.weight,fc1.bias,step,empty"
[[ "$names" == "$want" ]] || { echo "FAIL: tensors $names, expected $want"; exit 1; }
echo "safetensors python test: passed"
