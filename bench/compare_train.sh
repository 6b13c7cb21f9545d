#!/bin/sh
# bench/compare_train.sh: the engine (bench/train) against PyTorch
# (bench/torch_baseline.py) on Fashion-MNIST, side by side. For every cell
# (model x batch x threads) it runs C, PyTorch, C, PyTorch, ... R times each,
# interleaved so that drift in a shared machine's speed hits both alike, and
# prints a markdown table of the median samples/s and the ratio C/PyTorch.
# With --accuracy it also trains the CNN for 2 epochs on all 60k images
# (batch 32, lr ACC_LR, default 0.1, 1 thread, both engines) and prints the
# test accuracies.
#
# usage: bench/compare_train.sh [--repeats R] [--accuracy] [--out FILE]
#   R            repeats per engine and cell (default 3)
#   FILE         also keep every JSON line there (default: a temp file)
# Sample counts keep the whole run under 15 minutes on 2 cores: logreg and
# mlp:200,200 train one epoch on all 60000 images; the CNN, ~100x the FLOPs
# per image, on the first CNN_SAMPLES (default 6000) so a run takes seconds.
# Throughput per image does not depend on the count once past warm-up.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
repeats=3
accuracy=0
out=""
while [ $# -gt 0 ]; do
  case $1 in
  --repeats) repeats=$2; shift 2 ;;
  --accuracy) accuracy=1; shift ;;
  --out) out=$2; shift 2 ;;
  *) echo "usage: $0 [--repeats R] [--accuracy] [--out FILE]" >&2; exit 2 ;;
  esac
done
cnn_samples=${CNN_SAMPLES:-6000}
acc_lr=${ACC_LR:-0.1}
py=${TORCH_PYTHON:-/usr/bin/python3}
# PyTorch runs its convolutions in oneDNN, which picks its own instruction
# set whatever ATEN_CPU_CAPABILITY says: on a CPU with AVX-512 they ran on
# AVX-512 ("jit:avx512_core" in ONEDNN_VERBOSE) while the engine was held
# to AVX2. Emulating an AVX2 or SSE machine caps oneDNN the same way.
case ${COHORT_ISA:-} in
avx2) : "${ONEDNN_MAX_CPU_ISA:=AVX2}" ;;
sse2) : "${ONEDNN_MAX_CPU_ISA:=SSE41}" ;;
esac
if [ -n "${ONEDNN_MAX_CPU_ISA:-}" ]; then
  export ONEDNN_MAX_CPU_ISA
  echo "PyTorch's oneDNN capped at $ONEDNN_MAX_CPU_ISA" >&2
fi
[ -n "$out" ] || out=$(mktemp /tmp/compare_train.XXXXXX)
: >"$out"
"$root/bench/train" --help >/dev/null # builds bench_train when missing

cell() { # model batch threads samples
  i=0
  while [ "$i" -lt "$repeats" ]; do
    "$root/bench/train" --model "$1" --batch "$2" --threads "$3" \
      --samples "$4" >>"$out"
    "$py" "$root/bench/torch_baseline.py" --model "$1" --batch "$2" \
      --threads "$3" --samples "$4" >>"$out"
    i=$((i + 1))
  done
}

for model in logreg mlp:200,200 cnn; do
  samples=60000
  [ "$model" = cnn ] && samples=$cnn_samples
  for batch in 32 10; do
    for threads in 1 2; do
      echo "running $model batch $batch threads $threads" >&2
      cell "$model" "$batch" "$threads" "$samples"
    done
  done
done
if [ "$accuracy" = 1 ]; then
  echo "running the CNN for 2 epochs on 60000 images" >&2
  for impl in c torch; do
    if [ $impl = c ]; then
      "$root/bench/train" --model cnn --batch 32 --threads 1 --epochs 2 \
        --samples 60000 --lr "$acc_lr" | sed 's/"impl"/"accuracy_run":true,"impl"/' >>"$out"
    else
      "$py" "$root/bench/torch_baseline.py" --model cnn --batch 32 \
        --threads 1 --epochs 2 --samples 60000 --lr "$acc_lr" |
        sed 's/"impl"/"accuracy_run":true,"impl"/' >>"$out"
    fi
  done
fi
echo "raw results: $out" >&2

"$py" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
cells, acc = {}, []
for r in rows:
    if r.get("accuracy_run"):
        acc.append(r)
        continue
    key = (r["model"], r["batch"], r["threads"], r["samples"])
    cells.setdefault(key, {}).setdefault(r["impl"], []).append(r)
print("| model | batch | threads | samples | C samples/s | PyTorch samples/s"
      " | C/PyTorch | C GFLOP/s | PyTorch GFLOP/s | C acc | PyTorch acc |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key, by in cells.items():
    med = {k: statistics.median(r["samples_per_s"] for r in v)
           for k, v in by.items()}
    gf = {k: statistics.median(r["gflops"] for r in v) for k, v in by.items()}
    ac = {k: v[-1]["test_accuracy"] for k, v in by.items()}
    c, t = med.get("cohort", 0.0), med.get("pytorch", 0.0)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {c:,.0f} | {t:,.0f}"
          f" | {c / t if t else float('nan'):.2f} | {gf.get('cohort', 0):.1f}"
          f" | {gf.get('pytorch', 0):.1f} | {ac.get('cohort', 0):.4f}"
          f" | {ac.get('pytorch', 0):.4f} |")
if acc:
    print()
    print("| CNN, 2 epochs, 60000 images, batch 32 | lr | seconds"
          " | test accuracy |")
    print("|---|---:|---:|---:|")
    for r in acc:
        print(f"| {r['impl']} ({r['backend']}, {r['threads']} threads)"
              f" | {r['lr']} | {r['seconds']:.1f} | {r['test_accuracy']:.4f} |")
PY
