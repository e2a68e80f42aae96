#!/bin/bash
# pstrain's CPU ring all-reduce (bench/allreduce_throughput) and PyTorch
# 1.13's gloo (bench/gloo_allreduce.py), alternately, on the same sizes and
# process counts: --runs runs of each per process count, one line per size
# and run, then each one's median bus bandwidth per (ranks, size) and their
# ratio. On a shared machine, read the ratio, not the absolute figures.
#
#   bench/allreduce_side_by_side.sh [--ranks "2 3"] [--runs 3] [--rounds 10]
#                                   [--warmup 10] [--sizes_mb 4,40]
# Both skip --warmup rounds first: the ring's gRPC flow-control windows
# grow during its first few all-reduces (3 warm-up rounds left the ring's
# 4 MB median at 3 processes about twice as slow).
set -euo pipefail
cd "$(dirname "$0")/.."

ranks_list="2 3"
runs=3
rounds=10
warmup=10
sizes_mb="4,40"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks_list="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --sizes_mb) sizes_mb="$2"; shift 2 ;;
    *) echo "allreduce_side_by_side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

bazel build --config=opt //bench:allreduce_throughput >&2
ring=bazel-bin/bench/allreduce_throughput
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for ranks in $ranks_list; do
  for ((run = 1; run <= runs; run++)); do
    timeout 120 "$ring" --ranks "$ranks" --rounds "$rounds" \
      --warmup "$warmup" --sizes_mb "$sizes_mb" | tee -a "$out"
    timeout 120 /usr/bin/python3 bench/gloo_allreduce.py --ranks "$ranks" \
      --rounds "$rounds" --warmup "$warmup" --sizes_mb "$sizes_mb" | tee -a "$out"
  done
done
echo "median bus bandwidth over the runs (GB/s):"
awk '
  { for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    key = f["ranks"] " " f["mb"]; v[f["impl"], key, ++n[f["impl"], key]] = f["busbw_gbps"]; keys[key] = 1 }
  function median(impl, key,   m, i, j, t, a) {
    m = n[impl, key]; for (i = 1; i <= m; i++) a[i] = v[impl, key, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((m + 1) / 2)] }
  END { for (key in keys) { split(key, k, " "); r = median("ring", key); g = median("gloo", key)
          printf "ranks=%s mb=%s ring=%.3f gloo=%.3f ring/gloo=%.2f\n", k[1], k[2], r, g, (g > 0 ? r / g : 0) } }
' "$out" | sort
