#!/bin/bash
# Training throughput of the `cnn` with --workers workers on this machine,
# four ways, alternately, --runs runs each: pstrain's collective mode (the
# ring all-reduce overlapped with the backward), the same without the
# overlap (worker --noallreduce_overlap), pstrain's ps mode (sync, --ps ps
# tasks), and PyTorch 1.13 DDP over gloo (bench/pytorch_ddp_cnn.py: the same
# model, loss, optimizer, batch per worker and one compute thread per
# worker, with OpenBLAS and the glibc malloc tunables bench/pytorch_cnn.py
# uses). One line per run (global images/s), then each way's median with
# its range, and the ratios to collective mode. On a shared machine, read
# the ratios, not the absolute figures.
#
#   bench/ddp_side_by_side.sh [--workers 2] [--ps 1] [--steps 200]
#                             [--batch_size 64] [--runs 3] [--bin_dir DIR]
#
# pstrain's figures are its training rate (the chief's epoch figure in
# summary.json's history: the run's steps, the first included, without the
# final evaluation and checkpoint); DDP's are timed between two barriers
# after 10 untimed steps. (run_cluster.sh gives each worker --threads=1 and builds
# --config=opt binaries unless --bin_dir names a folder holding
# {chief,ps,worker}/.)
set -euo pipefail
cd "$(dirname "$0")/.."

workers=2
ps=1
steps=200
batch=64
runs=3
bin=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --ps) ps="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --batch_size) batch="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bin_dir) bin="$2"; shift 2 ;;
    *) echo "ddp_side_by_side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in workers ps steps batch runs; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || {
    echo "ddp_side_by_side.sh: --$v: \"${!v}\" must be a positive integer" >&2
    exit 2
  }
done

source bench/side_by_side.sh
[[ -n $bin ]] || third_party/install_deps.sh >&2
bin=$(opt_bin_dir "$bin")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The binaries again, the worker's with --noallreduce_overlap.
mkdir -p "$scratch/no_overlap/worker"
ln -s "$(readlink -f "$bin/chief")" "$scratch/no_overlap/chief"
ln -s "$(readlink -f "$bin/ps")" "$scratch/no_overlap/ps"
printf '#!/bin/sh\nexec %q --noallreduce_overlap "$@"\n' \
  "$(readlink -f "$bin/worker/worker")" >"$scratch/no_overlap/worker/worker"
chmod +x "$scratch/no_overlap/worker/worker"

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores;" \
  "cnn, $workers workers x $batch, $steps steps, adam 0.001, 1 thread each"
# One pstrain run; prints "<way> <images/s>".
pstrain() {  # pstrain WAY NUM_PS BIN_DIR
  local dir=$scratch/$1-$RANDOM
  deploy/local/run_cluster.sh --bin_dir "$3" --ps "$2" --workers "$workers" \
    --model_dir "$dir" --model=cnn --optimizer=adam --learning_rate=0.001 \
    --steps="$steps" --batch_size="$batch" \
    --print_every_steps=1000000 >"$dir.log" 2>&1 || {
    echo "ddp_side_by_side.sh: the $1 run failed; its log:" >&2
    tail -20 "$dir.log" >&2
    exit 1
  }
  echo "$1 $(pstrain_training_rate "$dir/summary.json")"
}
ddp() {
  local out
  out=$(pytorch_python bench/pytorch_ddp_cnn.py --workers "$workers" \
    --threads 1 --steps "$steps" --batch "$batch" --optimizer adam \
    --lr 0.001 2>"$scratch/ddp.log" | tail -1) || {
    echo "ddp_side_by_side.sh: the DDP run failed:" >&2
    tail -20 "$scratch/ddp.log" >&2
    exit 1
  }
  /usr/bin/python3 -c 'import json, sys
print("ddp", json.loads(sys.argv[1])["images_per_sec"])' "$out"
}
results=$scratch/results
for ((r = 1; r <= runs; r++)); do
  pstrain collective 0 "$bin" | tee -a "$results"
  pstrain collective_no_overlap 0 "$scratch/no_overlap" | tee -a "$results"
  pstrain ps "$ps" "$bin" | tee -a "$results"
  ddp | tee -a "$results"
done
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
ways = ("collective", "collective_no_overlap", "ps", "ddp")
vals = {w: [float(r[1]) for r in rows if r[0] == w] for w in ways}
med = {w: statistics.median(v) for w, v in vals.items()}
for w in ways:
    print(f"{w:22s} median {med[w]:8.1f} img/s (range {min(vals[w]):.1f}-"
          f"{max(vals[w]):.1f}); / collective {med[w] / med['collective']:.2f}")
PY
