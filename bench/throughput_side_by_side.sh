#!/bin/bash
# One process's CPU training throughput, pstrain (bench/train_throughput on
# an example's Keras JSON) and PyTorch 1.13 (bench/pytorch_examples.py
# --steps, the same architecture and initializers), alternately: --runs runs
# of each per model and thread count, then each one's median images/s with
# its range, and their ratio. Same batch (64), plain SGD (lr 0.01), 10
# untimed warm-up steps; PyTorch on OpenBLAS (openmp) and both under the
# glibc malloc tunables of bench/pytorch_cnn.py. On a shared machine, read
# the ratio, not the absolute figures. pstrain's JSON names its OpenMP wait
# ("openmp_wait": GOMP_SPINCOUNT=1000 unless set in the environment; see
# compute/cpu/openmp_wait_policy.h); PyTorch keeps libgomp's default spin,
# which collapses at 2 threads when other processes hold the cores (compare
# at 2 threads only on a quiet machine: check the load average printed).
#
#   bench/throughput_side_by_side.sh [--models "resnet transformer"]
#                                    [--threads "1 2"] [--runs 3] [--steps 100]
set -euo pipefail
cd "$(dirname "$0")/.."

models="resnet transformer"
threads_list="1 2"
runs=3
steps=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --threads) threads_list="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "throughput_side_by_side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

declare -A json=([resnet]=examples/resnet_small.keras3.json
                 [transformer]=examples/transformer.keras3.json)
source bench/side_by_side.sh
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295

bazel build --config=opt //bench:train_throughput >&2
pstrain=bazel-bin/bench/train_throughput
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for model in $models; do
  for threads in $threads_list; do
    for ((run = 1; run <= runs; run++)); do
      "$pstrain" --model "${json[$model]}" --threads "$threads" \
        --steps "$steps" --batch 64 | tail -1 | sed "s/^/$model /" | tee -a "$out"
      pytorch_python bench/pytorch_examples.py \
        --model "$model" --threads "$threads" --steps "$steps" \
        --batch_size 64 | tail -1 | sed "s/^/$model /" | tee -a "$out"
    done
  done
done
echo "median images/s over $runs runs [min, max]:"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    model, record = line.split(" ", 1)
    r = json.loads(record)
    runs.setdefault((model, r["threads"]), {}).setdefault(
        r["framework"], []).append(r["images_per_sec"])
for (model, threads), by in sorted(runs.items()):
    p, t = by["pstrain"], by["pytorch"]
    print(f"{model} threads={threads} "
          f"pstrain={statistics.median(p):.0f} [{min(p):.0f}, {max(p):.0f}] "
          f"pytorch={statistics.median(t):.0f} [{min(t):.0f}, {max(t):.0f}] "
          f"pstrain/pytorch={statistics.median(p) / statistics.median(t):.2f}")
PY
