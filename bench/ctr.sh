#!/bin/bash
# The click-through-rate workload side by side: pstrain's local cluster
# (deploy/local/run_cluster.sh --example criteo: 2 ps x 2 workers, one
# compute thread each, batch 512 per worker, Adagrad) and PyTorch 1.13
# training the same model in one process (bench/ctr_pytorch.py: sparse
# nn.Embedding, Adagrad, global batch 1024) at each of --pytorch_threads,
# on the same generated Criteo-format files, alternating, --runs times
# each. Prints each run, then per side the median examples/s with its
# range, the test AUC and log loss, the generator's Bayes-optimal AUC, and
# the ratios pstrain / PyTorch.
#
#   bench/ctr.sh [--rows 1000000] [--scale 1] [--data_dir DIR] [--runs 3]
#                [--pytorch_threads "1 2"] [--epochs 1] [--bin_dir DIR]
#
# The data (--rows training lines, a tenth as many test lines, per-field
# cardinalities of the Criteo Kaggle set times --scale) is written by
# bench/criteo_gen.py to --data_dir (default /tmp/pstrain-ctr-<rows>-<scale>)
# unless it is already there. Both sides' examples/s count training only:
# pstrain's is the chief's epoch figure (summary.json's history: training
# examples over the epochs' training seconds, the streaming reading,
# parsing and hashing of the files included; the final evaluation and
# checkpoint, which the run's wall time also holds, are not), PyTorch's
# its training loop (it parses the files and maps ids to rows first).
set -euo pipefail
cd "$(dirname "$0")/.."

rows=1000000
scale=1
data_dir=
runs=3
pytorch_threads="1 2"
epochs=1
bin_dir=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) rows=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --data_dir) data_dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --pytorch_threads) pytorch_threads=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --bin_dir) bin_dir=$2; shift 2 ;;
    *) echo "ctr.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $rows =~ ^[0-9]+$ && $rows -ge 1000 ]] ||
  { echo "ctr.sh: --rows must be an integer of at least 1000, not \"$rows\"" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] ||
  { echo "ctr.sh: --runs must be a positive integer, not \"$runs\"" >&2; exit 2; }
data_dir=${data_dir:-/tmp/pstrain-ctr-$rows-$scale}

if [ ! -f "$data_dir/test.tsv.bayes.json" ]; then
  echo "ctr.sh: writing $rows training lines (scale $scale) to $data_dir" >&2
  /usr/bin/python3 bench/criteo_gen.py --out_dir "$data_dir" \
    --train_rows "$rows" --test_rows $((rows / 10)) --scale "$scale" --seed 1 >&2
fi
source bench/side_by_side.sh
bin_dir=$(opt_bin_dir "$bin_dir")

out=$(mktemp)
model_dir=$(mktemp -d)
trap 'rm -rf "$out" "$model_dir"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores; data: $data_dir"
for ((run = 1; run <= runs; run++)); do
  rm -rf "$model_dir"/*
  # One compute thread per worker: the 2 workers and 2 ps share the cores.
  OMP_NUM_THREADS=1 deploy/local/run_cluster.sh --bin_dir "$bin_dir" \
    --example criteo --data_dir "$data_dir" --model_dir "$model_dir/run" \
    --epochs "$epochs" > "$model_dir/log" 2>&1 ||
    { tail -20 "$model_dir/log" >&2; exit 1; }
  /usr/bin/python3 - "$model_dir/run/summary.json" \
    "$(pstrain_training_rate "$model_dir/run/summary.json")" <<'PY' | tee -a "$out"
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"framework": "pstrain", "threads": 1,
                  "examples_per_sec": float(sys.argv[2]),
                  "run_examples_per_sec": s["images_per_sec"],
                  "test_auc": s["test_auc"], "test_logloss": s["test_logloss"]}))
PY
  for threads in $pytorch_threads; do
    pytorch_python bench/ctr_pytorch.py --data_dir "$data_dir" \
      --threads "$threads" --batch 1024 --epochs "$epochs" | tail -1 | tee -a "$out"
  done
done
echo "medians over $runs runs [min, max]:"
/usr/bin/python3 - "$out" "$data_dir/test.tsv.bayes.json" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = "pstrain" if r["framework"] == "pstrain" else "pytorch, %d thread%s" % (
        r["threads"], "" if r["threads"] == 1 else "s")
    runs.setdefault(key, []).append(r)
bayes = json.load(open(sys.argv[2]))["bayes_auc"]
med = lambda rs, k: statistics.median(r[k] for r in rs)
ours = runs.pop("pstrain")
for name, rs in [("pstrain", ours)] + sorted(runs.items()):
    rate = [r["examples_per_sec"] for r in rs]
    line = "%-20s %8.0f examples/s [%.0f, %.0f]  test AUC %.4f  log loss %.4f" % (
        name, med(rs, "examples_per_sec"), min(rate), max(rate),
        med(rs, "test_auc"), med(rs, "test_logloss"))
    if name != "pstrain":
        line += "  pstrain/this: %.2fx examples/s, AUC %+.4f" % (
            med(ours, "examples_per_sec") / med(rs, "examples_per_sec"),
            med(ours, "test_auc") - med(rs, "test_auc"))
    print(line)
print("Bayes-optimal test AUC %.4f" % bayes)
PY
