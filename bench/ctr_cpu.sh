#!/bin/bash
# Where the CTR workload's CPU goes, independent of the machine's load: runs
# bench/ctr.sh's pstrain side (deploy/local/run_cluster.sh --example criteo,
# 2 ps x 2 workers, one compute thread each, batch 512 per worker) with
# every process under /usr/bin/time, and prints, per process (chief, ps 0,
# ps 1, worker 0, worker 1) and in all, the CPU seconds (user + system) and
# the voluntary and involuntary context switches (all threads), each per
# million training examples, beside the run's examples/s, test AUC and the
# load average. On 2 cores the wall time is at least the total CPU seconds
# over 2: CPU seconds are what a speed-up must cut when the machine is busy
# and examples/s are noise. They too rise with the load (caches shared with
# other jobs: one build gave 44.7 to 56.4 s at load averages 8 to 12), less
# than examples/s fall: compare two builds alternately, run by run.
#
#   bench/ctr_cpu.sh --bin_dir DIR --data_dir DIR [--runs 1] [--epochs 1]
#
# --data_dir holds Criteo-format files (bench/ctr.sh writes them with
# bench/criteo_gen.py); --bin_dir is an opt build's bazel-bin.
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=
data_dir=
runs=1
epochs=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin_dir) bin_dir=$2; shift 2 ;;
    --data_dir) data_dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    *) echo "ctr_cpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $bin_dir && -x $bin_dir/ps/ps ]] ||
  { echo "ctr_cpu.sh: --bin_dir must hold ps/ps, worker/worker, chief/chief" >&2; exit 2; }
[[ -n $data_dir && -f $data_dir/test.tsv.bayes.json ]] ||
  { echo "ctr_cpu.sh: --data_dir must hold bench/criteo_gen.py's files" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] ||
  { echo "ctr_cpu.sh: --runs must be a positive integer, not \"$runs\"" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A bin_dir of wrappers: each process runs under /usr/bin/time, which
# writes its rusage (all threads) to a file named after it.
for b in ps/ps worker/worker chief/chief; do
  mkdir -p "$work/bin/${b%/*}"
  cat >"$work/bin/$b" <<EOF
#!/bin/bash
role=\$(/usr/bin/python3 -c 'import json, os; t = json.loads(os.environ["TF_CONFIG"])["task"]; print("%s-%d" % (t["type"], t["index"]))')
exec /usr/bin/time -f '%U %S %w %c' -o "$work/times/\$role.\$\$" "$(realpath "$bin_dir/$b")" "\$@"
EOF
  chmod +x "$work/bin/$b"
done

for ((run = 1; run <= runs; run++)); do
  rm -rf "$work/times" "$work/run"
  mkdir -p "$work/times"
  load=$(cut -d' ' -f1 /proc/loadavg)
  OMP_NUM_THREADS=1 deploy/local/run_cluster.sh --bin_dir "$work/bin" \
    --example criteo --data_dir "$data_dir" --model_dir "$work/run" \
    --epochs "$epochs" >"$work/log" 2>&1 ||
    { tail -20 "$work/log" >&2; exit 1; }
  /usr/bin/python3 - "$work/run/summary.json" "$work/times" "$load" \
    "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import glob, json, os, sys
summary = json.load(open(sys.argv[1]))
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[2], "*"))):
    role = os.path.basename(path).split(".")[0]
    fields = open(path).read().split()[-4:]
    user, system, vol, invol = float(fields[0]), float(fields[1]), int(fields[2]), int(fields[3])
    total = rows.setdefault(role, [0.0, 0.0, 0, 0])
    for i, v in enumerate((user, system, vol, invol)):
        total[i] += v
rate = summary["images_per_sec"]
n = rate * summary["wall_seconds"]  # training examples of the run
print("load average %s -> %s; %.0f examples/s; test AUC %.6f, log loss %.6f"
      % (sys.argv[3], sys.argv[4], rate, summary["test_auc"], summary["test_logloss"]))
scale = 1e6 / n
print("%.0f training examples in %.1f s; per 1 M of them:" % (n, summary["wall_seconds"]))
print("%-9s %8s %8s %8s %10s %10s" % ("process", "cpu_s", "user_s", "sys_s", "vol_cs", "invol_cs"))
sums = [0.0, 0.0, 0, 0]
for role in sorted(rows, key=lambda r: ("chief", "ps", "worker").index(r.split("-")[0]) * 10 + int(r.split("-")[1])):
    u, s, v, i = rows[role]
    sums = [a + b for a, b in zip(sums, rows[role])]
    print("%-9s %8.1f %8.1f %8.1f %10.0f %10.0f" % (role, (u + s) * scale, u * scale, s * scale, v * scale, i * scale))
u, s, v, i = sums
print("%-9s %8.1f %8.1f %8.1f %10.0f %10.0f" % ("all", (u + s) * scale, u * scale, s * scale, v * scale, i * scale))
PY
done
