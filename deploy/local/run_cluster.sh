#!/usr/bin/env bash
# Runs a pstrain cluster on this machine: a chief, --ps ps tasks (default 2)
# and --workers workers (default 2) on 127.0.0.1 (ports picked at start),
# training on Fashion-MNIST (by default the cnn with Adam for one epoch).
# --ps 0 lists no "ps" job: a collective run (MultiWorkerMirroredStrategy),
# the workers holding the model, all-reducing their gradients and writing
# the checkpoints to --model_dir (the chief's --allreduce_dtype bf16 halves
# what they send).
# Every other flag goes to the chief (--model, --optimizer, --epochs,
# --mode, --checkpoint_every_steps, ...). Logs, summary.json and the
# checkpoints (ckpt-<step>/) go to --model_dir (/tmp/pstrain); a model_dir
# that already holds a checkpoint resumes from it.
# Every process it started is stopped on success, failure or Ctrl-C.
# --data_dir DIR goes to the chief and the workers (a folder of train.csv
# and test.csv, see README; default Debian's Fashion-MNIST).
# --device (auto, cpu, gpu or gpu:N; default auto) goes to the workers:
# auto computes on the GPUs when there are any. --bin_dir DIR runs the
# chief, ps and worker binaries found in DIR/{chief,ps,worker}/ instead of
# building them (a machine without Bazel, such as a GPU host).
# With --restart_failed, a ps task, worker or the chief killed by a signal
# (an OOM kill, a `kill -9`) is started again, as Kubernetes would, up to 10
# times each; the run recovers (README: "When a process dies").
# --example criteo trains examples/wide_deep.keras3.json (a growing
# embedding table and an MLP) on Criteo-format data that bench/criteo_gen.py
# writes to --data_dir (default /tmp/pstrain-criteo) when it holds no
# test.tsv.bayes.json (a small set: the run takes a
# few minutes on 2 cores), and prints the test AUC and log loss beside the
# generator's Bayes-optimal AUC.
# With --metrics, every process serves Prometheus metrics at
# http://127.0.0.1:<port>/metrics (free ports picked at start, printed, and
# written as a Prometheus scrape config to <model_dir>/prometheus.yml).
#
#   deploy/local/run_cluster.sh --ps 2 --workers 2 --model cnn --epochs 1
#
# Exits with the chief's status once every process has stopped: when the
# chief fails (a bad flag, an unsupported model, a failed run), at once,
# after stopping the ps tasks and workers. When a ps task or worker refuses
# its flags (status 2, e.g. --device gpu on a host without one), the script
# prints its line, stops every process and exits 2.
set -euo pipefail
cd "$(dirname "$0")/../.."

num_ps=2
num_workers=2
model_dir=/tmp/pstrain
restart_failed=0
metrics=0
device=auto
example=
data_dir=
bin=
chief_flags=()
data_flags=()
worker_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ps) num_ps=$2; shift 2 ;;
    --ps=*) num_ps=${1#*=}; shift ;;
    --workers) num_workers=$2; shift 2 ;;
    --workers=*) num_workers=${1#*=}; shift ;;
    --model_dir) model_dir=$2; shift 2 ;;
    --model_dir=*) model_dir=${1#*=}; shift ;;
    --restart_failed) restart_failed=1; shift ;;
    --metrics) metrics=1; shift ;;
    --data_dir) data_dir=$2; data_flags=(--data_dir="$2"); chief_flags+=("$1=$2"); shift 2 ;;
    --data_dir=*) data_dir=${1#*=}; data_flags=("$1"); chief_flags+=("$1"); shift ;;
    --device) device=$2; shift 2 ;;
    --device=*) device=${1#*=}; shift ;;
    --example) example=$2; shift 2 ;;
    --example=*) example=${1#*=}; shift ;;
    --bin_dir) bin=$2; shift 2 ;;
    --bin_dir=*) bin=${1#*=}; shift ;;
    *) chief_flags+=("$1"); shift ;;
  esac
done

case "$example" in
  '') ;;
  criteo)
    criteo_dir=${data_dir:-/tmp/pstrain-criteo}
    if [ ! -f "$criteo_dir/test.tsv.bayes.json" ]; then
      echo "run_cluster: writing a Criteo-format data set to $criteo_dir" >&2
      /usr/bin/python3 bench/criteo_gen.py --out_dir "$criteo_dir" \
        --train_rows 200000 --test_rows 20000 --scale 0.01 --seed 1 >&2
    fi
    data_flags=(--data_dir="$criteo_dir")
    # The example's settings first: flags given on the command line win.
    chief_flags=(--model=examples/wide_deep.keras3.json --data_format=criteo
      --data_dir="$criteo_dir" --optimizer=adagrad --learning_rate=0.05
      --batch_size=512 --print_every_steps=50 "${chief_flags[@]}")
    ;;
  *) echo "run_cluster: --example: \"$example\" must be criteo" >&2; exit 2 ;;
esac

if [ -z "$bin" ]; then
  third_party/install_deps.sh
  bazel build --config=opt //chief //ps //worker >&2
  bin=$(bazel info --config=opt bazel-bin 2>/dev/null)
fi

# Free ports, chosen by the kernel.
num_ports=$((1 + num_ps + num_workers))
ports=($(python3 - "$((num_ports * (1 + metrics)))" <<'PY'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
))
join() { local IFS=,; echo "$*"; }
addr() { echo "\"127.0.0.1:$1\""; }
chief=$(addr "${ports[0]}")
ps_list=()
for ((i = 0; i < num_ps; i++)); do ps_list+=("$(addr "${ports[$((1 + i))]}")"); done
worker_list=()
for ((i = 0; i < num_workers; i++)); do
  worker_list+=("$(addr "${ports[$((1 + num_ps + i))]}")")
done
ps_job=
if [ "$num_ps" -gt 0 ]; then ps_job=", \"ps\": [$(join "${ps_list[@]}")]"; fi
cluster="{\"chief\": [$chief]$ps_job, \"worker\": [$(join "${worker_list[@]}")]}"
tf_config() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }
# --metrics_port of task $1 (0 chief, then ps, then workers), or 0: off.
metrics_port() { if [ "$metrics" = 1 ]; then echo "${ports[$((num_ports + $1))]}"; else echo 0; fi; }

# Runs "$@" for task $1 ("ps 0", "worker 1", "chief"), which logs to $2;
# with --restart_failed, runs it again when a signal killed it. A ps task or
# worker that exits with status 2 refused its flags or TF_CONFIG, which no
# restart mends, and the chief would wait for it in vain: it stops the
# cluster (USR1 to this script), its refusal on the script's stderr.
supervise() {
  local name=$1 log=$2 child rc restarts=0
  shift 2
  trap 'kill "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 143' TERM
  while true; do
    "$@" &
    child=$!
    [ "$name" = chief ] && chief_pid=$child
    rc=0
    wait "$child" || rc=$?
    if [ "$restart_failed" = 1 ] && [ "$rc" -gt 128 ] && [ "$restarts" -lt 10 ]; then
      restarts=$((restarts + 1))
      echo "run_cluster: ${1##*/} exited with status $rc; starting it again" >&2
      sleep 1
      continue
    fi
    if [ "$rc" = 2 ] && [ "$name" != chief ]; then
      echo "run_cluster: $name refused to start: $(tail -n 1 "$log")" >&3
      kill -USR1 $$
    fi
    return "$rc"
  done
}

mkdir -p "$model_dir/logs"
pids=()
# Stops every ps task and worker and waits until they are gone.
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
chief_pid=
# A ps task or worker refused to start (supervise): stop the chief too.
trap 'echo "run_cluster: stopping the cluster" >&2; kill "$chief_pid" 2>/dev/null; exit 2' USR1
# The script's stderr, for supervise() in the tasks' subshells.
exec 3>&2
# Each log is made before its task is forked, so that it is there even when
# the chief refuses its flags before a background task has run a line.
for ((i = 0; i < num_ps; i++)); do
  : >>"$model_dir/logs/ps-$i.log"
  TF_CONFIG=$(tf_config ps "$i") supervise "ps $i" "$model_dir/logs/ps-$i.log" "$bin/ps/ps" \
    --model_dir="$model_dir" --metrics_port="$(metrics_port $((1 + i)))" \
    >>"$model_dir/logs/ps-$i.log" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < num_workers; i++)); do
  : >>"$model_dir/logs/worker-$i.log"
  TF_CONFIG=$(tf_config worker "$i") supervise "worker $i" "$model_dir/logs/worker-$i.log" "$bin/worker/worker" \
    --threads=1 --device="$device" "${data_flags[@]}" --model_dir="$model_dir" \
    "${worker_flags[@]}" \
    --metrics_port="$(metrics_port $((1 + num_ps + i)))" >>"$model_dir/logs/worker-$i.log" 2>&1 &
  pids+=($!)
done
echo "cluster: $cluster" >&2
echo "logs: $model_dir/logs" >&2
if [ "$metrics" = 1 ]; then
  {
    echo "scrape_configs:"
    echo "  - job_name: pstrain"
    echo "    scrape_interval: 5s"
    echo "    static_configs:"
    echo "      - targets: ['127.0.0.1:$(metrics_port 0)']"
    echo "        labels: {task: chief}"
    for ((i = 0; i < num_ps; i++)); do
      echo "      - targets: ['127.0.0.1:$(metrics_port $((1 + i)))']"
      echo "        labels: {task: ps$i}"
    done
    for ((i = 0; i < num_workers; i++)); do
      echo "      - targets: ['127.0.0.1:$(metrics_port $((1 + num_ps + i)))']"
      echo "        labels: {task: worker$i}"
    done
  } >"$model_dir/prometheus.yml"
  echo "metrics: chief http://127.0.0.1:$(metrics_port 0)/metrics" >&2
  for ((i = 0; i < num_ps; i++)); do
    echo "metrics: ps $i http://127.0.0.1:$(metrics_port $((1 + i)))/metrics" >&2
  done
  for ((i = 0; i < num_workers; i++)); do
    echo "metrics: worker $i http://127.0.0.1:$(metrics_port $((1 + num_ps + i)))/metrics" >&2
  done
  echo "metrics: scrape config $model_dir/prometheus.yml (prometheus --config.file=$model_dir/prometheus.yml)" >&2
fi
status=0
TF_CONFIG=$(tf_config chief 0) supervise chief - "$bin/chief/chief" \
  --model_dir="$model_dir" --metrics_port="$(metrics_port 0)" "${chief_flags[@]}" || status=$?
if [ "$status" = 0 ]; then
  # The chief told every task the run is over: they exit by themselves.
  for pid in "${pids[@]}"; do wait "$pid" || status=${status:-$?}; done
else
  # A chief that refused its flags or model, or whose run failed: the ps
  # tasks and workers would wait for it (--chief_patience) in vain.
  echo "run_cluster: the chief exited with status $status; stopping the ps" \
    "tasks and workers" >&2
  cleanup
fi
trap - EXIT
# A failed run wrote no summary: one there is an earlier run's.
[ "$status" = 0 ] && [ -f "$model_dir/summary.json" ] && cat "$model_dir/summary.json"
if [ "$status" = 0 ] && [ "$example" = criteo ] && [ -f "$model_dir/summary.json" ]; then
  /usr/bin/python3 - "$model_dir/summary.json" "$criteo_dir/test.tsv.bayes.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
bayes = json.load(open(sys.argv[2]))
print("criteo: test AUC %.4f, log loss %.4f; Bayes-optimal AUC %.4f, log loss %.4f"
      % (run.get("test_auc") or float("nan"), run.get("test_logloss") or float("nan"),
         bayes["bayes_auc"], bayes["bayes_log_loss"]))
PY
fi
# The newest complete checkpoint (a ckpt-<step> directory with index.pb).
latest=$(for d in "$model_dir"/ckpt-*; do
  n=${d##*/ckpt-}
  if [[ $n =~ ^[0-9]+$ ]] && [ -f "$d/index.pb" ]; then echo "$n $d"; fi
done | sort -n | tail -n 1 | cut -d' ' -f2-)
if [ -n "$latest" ]; then
  echo "latest checkpoint: $latest" >&2
  echo "export it: $bin/chief/chief --export_safetensors=$model_dir/model.safetensors --model_dir=$model_dir" >&2
fi
exit "$status"
