#!/bin/bash
# Tensor model parallelism against data parallelism on this machine: the
# Transformer example (examples/transformer_tp.keras3.json, split by
# examples/transformer_tp.layout.json) trained by 2 workers at
# --mesh=data:2,model:1 (two replicas, each computing half the global
# batch) and at --mesh=data:1,model:2 (one model-parallel group, each
# member computing its half of every split layer for the whole batch),
# with the same global batch, steps, SGD and one compute thread per worker,
# on deploy/local/run_cluster.sh with 1 ps task (the model is small: a
# second ps task would split the same bytes over two processes and add one
# more to 2 shared cores). --runs runs of each mesh, alternating.
#
# Per run: the step time (the chief's summary.json wall_seconds, from the
# first step to the last, over the steps), examples/s (global batch over
# that), and the bytes each step moves, measured by the workers and read
# from their Prometheus endpoints (run_cluster.sh --metrics, scraped every
# 0.2 s while the run lasts): to and from the ps
# (pstrain_worker_ps_bytes_total{direction}: the serialized push and pull
# messages) and within the model-parallel group
# (pstrain_worker_group_bytes_total: the payload the group's ring sends),
# summed over both workers and divided by the steps they completed between
# the first and last scrape (each worker's last scrape may fall within a
# step: within one step's bytes over that span). Then per mesh the median
# step time with its range, examples/s, the bytes per step, and the ratios
# data:1,model:2 / data:2,model:1. On a shared machine, read the ratios.
#
#   bench/tensor_parallel.sh [--runs 3] [--steps 500] [--batch_size 64]
#                            [--bin_dir DIR]
# --batch_size is the global batch (data:2 workers compute half of it
# each, a model:2 group all of it). --bin_dir names a folder holding
# {chief,ps,worker}/ (e.g. bazel-bin of `bazel build --config=opt //ps:ps
# //worker:worker //chief:chief`); without it run_cluster.sh builds them.
# The data: 4096 lines of 8 token ids in [0, 256) and a label (their sum
# mod 10), as tests/tensor_parallel_test.cc writes them.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
steps=500
batch=64
bin_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --batch_size) batch="$2"; shift 2 ;;
    --bin_dir) bin_flags=(--bin_dir "$2"); shift 2 ;;
    *) echo "tensor_parallel.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $((batch % 2)) -eq 0 && $batch -ge 2 ]] || {
  echo "tensor_parallel.sh: --batch_size $batch must be even (2 replicas)" >&2
  exit 2
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
/usr/bin/python3 - "$scratch/tokens" <<'PY'
import os, random, sys
os.makedirs(sys.argv[1])
for name, n, seed in (("train.csv", 4096, 1), ("test.csv", 256, 2)):
    rng = random.Random(seed)
    with open(os.path.join(sys.argv[1], name), "w") as f:
        for _ in range(n):
            ids = [rng.randrange(256) for _ in range(8)]
            f.write(",".join(map(str, ids)) + f",{sum(ids) % 10}\n")
PY

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores;" \
  "transformer_tp, 2 workers, 1 ps, global batch $batch, $steps steps"
# One run; prints "<mesh> <ms/step> <examples/s> <to ps> <from ps> <group>"
# (bytes per step, both workers together).
run() {  # run MESH BATCH_PER_WORKER
  local dir=$scratch/$1-$RANDOM
  mkdir -p "$dir"
  deploy/local/run_cluster.sh "${bin_flags[@]}" --ps 1 --workers 2 --metrics \
    --model_dir "$dir" --data_dir "$scratch/tokens" \
    --model=examples/transformer_tp.keras3.json \
    --layout_map=examples/transformer_tp.layout.json --mesh="$1" \
    --optimizer=sgd --learning_rate=0.05 --threads=1 \
    --steps="$steps" --batch_size="$2" \
    --print_every_steps=1000000 >"$dir.log" 2>&1 &
  local cluster=$!
  # The workers' metrics: scraped until the cluster is gone.
  /usr/bin/python3 - "$dir.log" "$dir.scrapes" "$cluster" <<'PY' &
import os, re, sys, time, urllib.request
log, out, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = ("pstrain_worker_steps_total",
         'pstrain_worker_ps_bytes_total{direction="sent"}',
         'pstrain_worker_ps_bytes_total{direction="received"}',
         'pstrain_worker_group_bytes_total{direction="sent"}')
def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
urls = []
with open(out, "w") as f:
    while alive():
        if len(urls) < 2:
            urls = re.findall(r"metrics: worker \d+ (http://\S+)",
                              open(log).read())
        for w, url in enumerate(urls):
            try:
                text = urllib.request.urlopen(url, timeout=1).read().decode()
            except Exception:
                continue
            values = dict(l.rsplit(" ", 1) for l in text.splitlines()
                          if l and not l.startswith("#"))
            if all(n in values for n in names):
                f.write(" ".join([str(w)] + [values[n] for n in names]) + "\n")
                f.flush()
        time.sleep(0.2)
PY
  local scraper=$!
  wait "$cluster" || {
    echo "tensor_parallel.sh: the $1 run failed; its log:" >&2
    tail -20 "$dir.log" >&2
    exit 1
  }
  wait "$scraper"
  /usr/bin/python3 - "$dir/summary.json" "$dir.scrapes" "$1" "$batch" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ms = 1000 * s["wall_seconds"] / s["global_step"]
first, last = {}, {}
for line in open(sys.argv[2]):
    w, *v = line.split()
    v = [float(x) for x in v]
    first.setdefault(w, v)
    last[w] = v
if len(last) != 2:
    sys.exit(f"tensor_parallel.sh: scraped {len(last)} of 2 workers")
per_step = [0.0, 0.0, 0.0]
for w in last:
    steps = last[w][0] - first[w][0]
    if steps < 1:
        sys.exit(f"tensor_parallel.sh: worker {w}: no step between scrapes")
    for i in range(3):
        per_step[i] += (last[w][i + 1] - first[w][i + 1]) / steps
print(sys.argv[3], f"{ms:.2f}", f"{int(sys.argv[4]) * 1000 / ms:.1f}",
      *(f"{b:.0f}" for b in per_step))
PY
}
results=$scratch/results
echo "mesh ms/step examples/s bytes/step: to_ps from_ps group"
for ((r = 1; r <= runs; r++)); do
  run data:2,model:1 $((batch / 2)) | tee -a "$results"
  run data:1,model:2 "$batch" | tee -a "$results"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
med = {}
for mesh in ("data:2,model:1", "data:1,model:2"):
    r = [[float(x) for x in row[1:]] for row in rows if row[0] == mesh]
    med[mesh] = [statistics.median(c) for c in zip(*r)]
    ms = [x[0] for x in r]
    m = med[mesh]
    print(f"{mesh}: {m[0]:.2f} ms/step (median of {len(r)}, "
          f"{min(ms):.2f}-{max(ms):.2f}), {m[1]:.0f} examples/s; bytes/step: "
          f"ps {m[2] / 1024:.1f} KiB to, {m[3] / 1024:.1f} KiB from; "
          f"group {m[4] / 1024:.1f} KiB")
tp, dp = med["data:1,model:2"], med["data:2,model:1"]
print(f"data:1,model:2 / data:2,model:1: step time {tp[0] / dp[0]:.2f}x, "
      f"ps bytes {(tp[2] + tp[3]) / (dp[2] + dp[3]):.2f}x, "
      f"group bytes {tp[4] / 1024:.1f} KiB vs {dp[4] / 1024:.1f} KiB")
PY
