#!/bin/bash
# The main job's local cluster beside PyTorch 1.13's parameter server over
# torch.distributed.rpc (bench/pytorch_rpc_ps.py), sync and async,
# alternating, --runs times each: the same model (the cnn), optimizer (Adam
# 0.001), data (one epoch of Fashion-MNIST), batch per worker (64), ps
# tasks and workers (2 x 2 on this machine) and compute threads (one per
# process). pstrain's side is `deploy/local/run_cluster.sh --mode MODE`.
# Prints each run, then per side and mode the median training images/s
# with its range, and the ratios pstrain / PyTorch.
#
#   bench/cluster_side_by_side.sh [--runs 3] [--modes "sync async"]
#                                 [--bin_dir DIR]
#
# Both count training only: pstrain's figure is the chief's epoch rate
# (summary.json's history: images over the epoch's training seconds; not
# the final evaluation and checkpoint), PyTorch's its workers' images over
# the time from a common start, after loading the data, to the last step.
# (The --config=opt binaries are built unless --bin_dir names a folder
# holding {chief,ps,worker}/.)
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
modes="sync async"
bin_dir=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --bin_dir) bin_dir=$2; shift 2 ;;
    *) echo "cluster_side_by_side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || {
  echo "cluster_side_by_side.sh: --runs must be a positive integer, not \"$runs\"" >&2
  exit 2
}
for mode in $modes; do
  [[ $mode == sync || $mode == async ]] || {
    echo "cluster_side_by_side.sh: --modes: \"$mode\" is neither sync nor async" >&2
    exit 2
  }
done
source bench/side_by_side.sh
bin_dir=$(opt_bin_dir "$bin_dir")

out=$(mktemp)
scratch=$(mktemp -d)
trap 'rm -rf "$out" "$scratch"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores;" \
  "cnn, 2 ps x 2 workers x batch 64, Adam 0.001, 1 epoch"
for ((run = 1; run <= runs; run++)); do
  for mode in $modes; do
    rm -rf "${scratch:?}"/*
    OMP_NUM_THREADS=1 deploy/local/run_cluster.sh --bin_dir "$bin_dir" \
      --model_dir "$scratch/run" --mode="$mode" > "$scratch/log" 2>&1 ||
      { tail -20 "$scratch/log" >&2; exit 1; }
    /usr/bin/python3 - "$scratch/run/summary.json" "$mode" \
      "$(pstrain_training_rate "$scratch/run/summary.json")" <<'PY' | tee -a "$out"
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"framework": "pstrain", "mode": sys.argv[2],
                  "images_per_sec": float(sys.argv[3]),
                  "test_accuracy": s["test_accuracy"]}))
PY
    pytorch_python bench/pytorch_rpc_ps.py --mode "$mode" \
      > "$scratch/pytorch.log" 2>&1 ||
      { tail -20 "$scratch/pytorch.log" >&2; exit 1; }
    grep '^{' "$scratch/pytorch.log" | tail -1 | tee -a "$out"
  done
done
echo "medians over $runs runs [min, max]:"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs.setdefault((r["mode"], r["framework"]), []).append(r["images_per_sec"])
for mode in sorted({m for m, _ in runs}, reverse=True):
    ours = runs[(mode, "pstrain")]
    theirs = runs[(mode, "pytorch-rpc-ps")]
    fmt = lambda v: "%.0f [%.0f, %.0f]" % (statistics.median(v), min(v), max(v))
    print("%-5s pstrain %s  PyTorch RPC ps %s  images/s; pstrain / PyTorch %.2fx" % (
        mode, fmt(ours), fmt(theirs),
        statistics.median(ours) / statistics.median(theirs)))
PY
