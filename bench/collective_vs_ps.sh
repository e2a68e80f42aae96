#!/bin/bash
# Training throughput of collective mode (no ps: the workers all-reduce
# their gradients in the ring) against ps mode (sync, --ps ps tasks), on the
# same model, workers, batch and steps, on this machine through
# deploy/local/run_cluster.sh: --runs runs of each, alternately, one line
# per run (steps/s and images/s from the chief's summary.json, which times
# the training from its first step to the final checkpoint), then each
# mode's median and the ratio collective / ps. On a shared machine, read
# the ratio, not the absolute figures.
#
#   bench/collective_vs_ps.sh [--model cnn] [--workers 2] [--ps 1]
#                             [--steps 200] [--batch_size 64] [--runs 3]
#                             [--bin_dir DIR]
# (run_cluster.sh gives each worker --threads=1, and builds --config=opt
# binaries unless --bin_dir names a folder holding {chief,ps,worker}/.)
set -euo pipefail
cd "$(dirname "$0")/.."

model=cnn
workers=2
ps=1
steps=200
batch=64
runs=3
bin_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --ps) ps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --batch_size) batch="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bin_dir) bin_flags=(--bin_dir "$2"); shift 2 ;;
    *) echo "collective_vs_ps.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $ps -ge 1 ]] || { echo "collective_vs_ps.sh: --ps must be >= 1 (the ps side)" >&2; exit 2; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores;" \
  "$model, $workers workers x $batch, $steps steps"
# One run; prints "<mode> <steps/s> <images/s>".
run() {  # run MODE NUM_PS
  local dir=$scratch/$1-$RANDOM
  deploy/local/run_cluster.sh "${bin_flags[@]}" --ps "$2" --workers "$workers" \
    --model_dir "$dir" \
    --model="$model" --steps="$steps" --batch_size="$batch" \
    --print_every_steps=1000000 >"$dir.log" 2>&1 || {
    echo "collective_vs_ps.sh: the $1 run failed; its log:" >&2
    tail -20 "$dir.log" >&2
    exit 1
  }
  /usr/bin/python3 - "$dir/summary.json" "$1" "$workers" "$batch" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ips = s["images_per_sec"]
print(f"{sys.argv[2]} {ips / (int(sys.argv[3]) * int(sys.argv[4])):.2f} {ips:.1f}")
PY
}
results=$scratch/results
for ((r = 1; r <= runs; r++)); do
  run collective 0 | tee -a "$results"
  run ps "$ps" | tee -a "$results"
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = {m: statistics.median(float(r[1]) for r in rows if r[0] == m)
       for m in ("collective", "ps")}
print(f"median steps/s: collective {med['collective']:.2f}, ps {med['ps']:.2f}; "
      f"collective / ps = {med['collective'] / med['ps']:.2f}")
PY
