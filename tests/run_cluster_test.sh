#!/usr/bin/env bash
# deploy/local/run_cluster.sh with the built binaries (--bin_dir):
#  1. a model the chief refuses (an LSTM): the script exits with the chief's
#     status 2 at once, having stopped the ps tasks and workers it started:
#     no process of it is left (the binaries run from a directory of this
#     test's own, so pgrep finds exactly them). The ps tasks and workers wait
#     minutes for a chief by themselves (--chief_patience): a script that
#     waited for them would run into this test's timeout.
#  2. the same with --restart_failed: a chief that refused its flags is not
#     started again. Workers that refuse their flags (--device tpu) stop
#     the whole cluster: status 2, their line, no process left.
#  3. --restart_failed still restarts a process killed by a signal: a ps
#     task SIGKILLed during a run is started again; SIGTERM to the script
#     then ends the run (status 143) and leaves no process behind.
#  4. --ps 0 runs a collective run (no "ps" job): the workers train, worker
#     0 writes the checkpoints, the summary says 0 ps.
#  5. --example criteo trains the wide-and-deep example on a Criteo-format
#     data set of bench/criteo_gen.py (a small one, written here first) and
#     prints the test AUC and log loss beside the Bayes-optimal AUC;
#     --example with another name is refused with status 2.
#
#   bazel test //tests:run_cluster_test
set -uo pipefail

root=${TEST_SRCDIR:?run under bazel test}/${TEST_WORKSPACE:-pstrain}
scratch=${TEST_TMPDIR:?}
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# The binaries, behind links in a directory only this test uses.
bin=$scratch/bin
for b in chief ps worker; do
  mkdir -p "$bin/$b"
  ln -sf "$root/$b/$b" "$bin/$b/$b"
done
# Every process this test's clusters run: the binaries, and the script and
# its subshells (their command lines hold --model_dir).
left_behind() { pgrep -af "$bin/(chief|ps|worker)/|$scratch/md-" || true; }
stop_everything() {
  pkill -KILL -f "$bin/(chief|ps|worker)/|$scratch/md-" 2>/dev/null || true
}
trap stop_everything EXIT

layer() { echo "{\"class_name\": \"$1\", \"config\": {\"name\": \"$2\", $3}}"; }
model() {
  echo "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"m\", \"layers\": [
    $(layer InputLayer in '"batch_input_shape": [null, 2]'), $1,
    $(layer Dense out '"units": 2, "activation": "softmax"')]}}"
}
model "$(layer LSTM lstm '"units": 4')" >"$scratch/lstm.json"
model "$(layer Dense hidden '"units": 4, "activation": "relu"')" \
  >"$scratch/dense.json"
mkdir -p "$scratch/data"
for ((i = 0; i < 4096; i++)); do
  echo "0.$((i % 7)),-0.$((i % 5)),$((i % 2))"
done >"$scratch/data/train.csv"
cp "$scratch/data/train.csv" "$scratch/data/test.csv"

# Waits (at most 60 s) until file $1 holds the extended regex $2.
wait_for() {
  for ((i = 0; i < 600; i++)); do
    grep -qE "$2" "$1" && return 0
    sleep 0.1
  done
  fail "no \"$2\" in $1 after 60 s: $(cat "$1")"
  return 1
}

refused_model() {
  local name=$1
  shift
  local md=$scratch/md-$name out=$scratch/$name.out rc=0
  "$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --ps 2 --workers 2 \
    --model_dir "$md" --model "$scratch/lstm.json" "$@" >"$out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$name: status $rc, not the chief's 2: $(cat "$out")"
  grep -q -- "--model: model: layer 1 'lstm' (LSTM): LSTM is not supported" \
    "$out" || fail "$name: the chief's refusal is not in the output: $(cat "$out")"
  grep -q "stopping the ps tasks and workers" "$out" ||
    fail "$name: no word of stopping the tasks: $(cat "$out")"
  if grep -q "starting it again" "$out"; then
    fail "$name: a process was started again: $(cat "$out")"
  fi
  for log in ps-0 ps-1 worker-0 worker-1; do
    [ -f "$md/logs/$log.log" ] || fail "$name: $log was not started"
  done
  local left
  left=$(left_behind)
  [ -z "$left" ] || fail "$name: processes left behind: $left"
  echo "$name: status $rc, nothing left behind"
}

refused_model refused
refused_model refused-restart --restart_failed

# 2b. Workers that refuse their flags (--device goes to them): the script
# says which and why, stops every process (the chief would wait for them)
# and exits 2, with --restart_failed too.
for restart in "" --restart_failed; do
  md=$scratch/md-worker-flags$restart
  out=$scratch/worker-flags$restart.out
  rc=0
  timeout 120 "$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --ps 1 \
    --workers 2 --model_dir "$md" --model "$scratch/dense.json" \
    --data_dir "$scratch/data" --device tpu $restart >"$out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "--device tpu $restart: status $rc, not 2: $(cat "$out")"
  grep -qE -- 'run_cluster: worker [01] refused to start: --device: "tpu" is not auto, cpu, gpu or gpu:N' \
    "$out" || fail "--device tpu $restart: no worker's refusal: $(cat "$out")"
  left=$(left_behind)
  [ -z "$left" ] || fail "--device tpu $restart: processes left behind: $left"
  echo "worker flags $restart: status $rc, nothing left behind"
done

# 3. A ps task killed by a signal is started again; SIGTERM ends the script.
md=$scratch/md-restart
out=$scratch/restart.out
"$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --ps 1 --workers 1 \
  --model_dir "$md" --model "$scratch/dense.json" --data_dir "$scratch/data" \
  --restart_failed --steps=100000000 --batch_size=8 --threads=1 \
  --print_every_steps=1000 >"$out" 2>&1 &
script=$!
if wait_for "$out" "chief listening on"; then
  ps_pid=$(pgrep -f "$bin/ps/ps")
  [ -n "$ps_pid" ] || fail "no ps process running"
  kill -KILL $ps_pid
  # supervise() writes to the ps task's log.
  if wait_for "$md/logs/ps-0.log" \
    "run_cluster: ps exited with status 137; starting it again"; then
    for ((i = 0; i < 600; i++)); do
      new_pid=$(pgrep -f "$bin/ps/ps")
      [ -n "$new_pid" ] && [ "$new_pid" != "$ps_pid" ] && break
      sleep 0.1
    done
    [ -n "$new_pid" ] && [ "$new_pid" != "$ps_pid" ] ||
      fail "the ps task was not started again"
  fi
fi
kill -TERM "$script"
rc=0
wait "$script" || rc=$?
[ "$rc" = 143 ] || fail "SIGTERM: status $rc, not 143: $(cat "$out")"
left=$(left_behind)
[ -z "$left" ] || fail "after SIGTERM: processes left behind: $left"
echo "restart: ps $ps_pid killed, started again as ${new_pid:-?}; SIGTERM: $rc"

# 4. A collective run.
md=$scratch/md-collective
out=$scratch/collective.out
rc=0
"$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --ps 0 --workers 2 \
  --model_dir "$md" --model "$scratch/dense.json" --data_dir "$scratch/data" \
  --optimizer=sgd --steps=40 --batch_size=16 --threads=1 \
  --checkpoint_every_steps=20 >"$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "--ps 0: status $rc: $(tail -n 30 "$out")"
grep -q '"num_ps": 0' "$md/summary.json" ||
  fail "--ps 0: summary.json does not say 0 ps: $(cat "$md/summary.json")"
for step in 20 40; do
  [ -f "$md/ckpt-$step/index.pb" ] && [ -f "$md/ckpt-$step/worker-0.data" ] ||
    fail "--ps 0: no checkpoint of step $step by worker 0: $(ls "$md")"
done
grep -q "collective; " "$out" ||
  fail "--ps 0: the chief does not say collective: $(tail -n 30 "$out")"
echo "collective: status $rc, $(ls -d "$md"/ckpt-* | wc -l) checkpoints"
# A run that fails in the same directory does not print that run's summary.
rc=0
"$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --ps 0 --workers 2 \
  --model_dir "$md" --model "$scratch/lstm.json" >"$out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a refused run after --ps 0: status $rc: $(cat "$out")"
if grep -q '"num_ps"' "$out"; then
  fail "a refused run printed the earlier run's summary: $(cat "$out")"
fi

criteo=$scratch/criteo
/usr/bin/python3 "$root/bench/criteo_gen.py" --out_dir "$criteo" \
  --train_rows 8192 --test_rows 2048 --scale 0.001 --seed 3 >/dev/null ||
  fail "criteo_gen.py failed"
md=$scratch/md-criteo
out=$scratch/criteo.out
rc=0
"$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --example criteo \
  --data_dir "$criteo" --model_dir "$md" --batch_size=256 --epochs=2 \
  --threads=1 >"$out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "--example criteo: status $rc: $(tail -n 30 "$out")"
grep -qE "^criteo: test AUC 0\.[0-9]{4}, log loss [0-9.]+; Bayes-optimal AUC 0\.[0-9]{4}" \
  "$out" || fail "--example criteo: no AUC line: $(tail -n 30 "$out")"
grep -q '"test_logloss"' "$md/summary.json" ||
  fail "--example criteo: no log loss in summary.json"
grep -q "wide_deep" "$out" || fail "--example criteo: not the example's model"
rc=0
"$root/deploy/local/run_cluster.sh" --bin_dir "$bin" --example nope \
  >"$scratch/nope.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q -- '--example: "nope" must be criteo' "$scratch/nope.out" ||
  fail "--example nope: status $rc: $(cat "$scratch/nope.out")"
echo "criteo: $(grep '^criteo:' "$out")"

exit $((failures > 0))
