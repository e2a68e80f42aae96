#!/bin/bash
# Issue 20 item 4: training throughput when another process holds a core.
# Alternates, --runs times: bench/train_throughput at 1 thread on an idle
# host, then at --threads threads while a busy loop (one python3 process
# spinning) holds a core, each as the binaries run by default (OpenMP
# threads that spin briefly, then sleep: compute/cpu/openmp_wait_policy.h;
# and a tuner that times all the threads against one and trains on the
# faster: compute/cpu/adaptive_threads_backend.h) and, for comparison, with
# libgomp's own default spin (GOMP_SPINCOUNT=300000). Prints each run's JSON line, then medians [min, max] and each
# busy figure's ratio to the idle 1-thread one (the target: >= 0.8). The
# "idle" runs are only as idle as the machine: read the load average printed
# first.
#
#   bench/busy_host_throughput.sh [--model cnn] [--threads 2] [--runs 3]
#                                 [--steps 100]
set -euo pipefail
cd "$(dirname "$0")/.."

model=cnn
threads=2
runs=3
steps=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "busy_host_throughput.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

bazel build --config=opt //bench:train_throughput >&2
bin=bazel-bin/bench/train_throughput
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295
out=$(mktemp)
busy=
cleanup() {
  [[ -n "$busy" ]] && kill "$busy" 2>/dev/null
  rm -f "$out"
}
trap cleanup EXIT

run() {  # run <label> <threads> [VAR=value...]
  local label="$1" t="$2"
  shift 2
  env "$@" "$bin" --model "$model" --threads "$t" --steps "$steps" \
    --batch 64 | tail -1 | sed "s/^/$label /" | tee -a "$out"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for ((r = 1; r <= runs; r++)); do
  run idle_1thread 1
  /usr/bin/python3 -c 'while True: pass' &
  busy=$!
  run "busy_${threads}threads" "$threads"
  run "busy_${threads}threads_libgomp_default_spin" "$threads" \
    GOMP_SPINCOUNT=300000
  kill "$busy"
  wait "$busy" 2>/dev/null || true
  busy=
done
echo "model $model, median images/s over $runs runs [min, max]; ratio to idle_1thread:"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, record = line.split(" ", 1)
    runs.setdefault(label, []).append(json.loads(record)["images_per_sec"])
base = statistics.median(runs["idle_1thread"])
for label, v in runs.items():
    m = statistics.median(v)
    print(f"{label}: {m:.0f} [{min(v):.0f}, {max(v):.0f}] ratio={m / base:.2f}")
PY
