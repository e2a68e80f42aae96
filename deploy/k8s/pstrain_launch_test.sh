#!/usr/bin/env bash
# Unit tests of pstrain_launch.sh (pstrain-launch in the image): the TF_CONFIG
# it builds for pods of the Indexed Jobs / StatefulSets of deploy/k8s/, the
# TF_CONFIG of Kubeflow's TFJob operator taken as it is, the errors it reports,
# and the exec of the binary. Runs without Kubernetes: the pod's environment
# (hostname, namespace, resolv.conf, JOB_COMPLETION_INDEX) is simulated.
#
#   bazel test //deploy:pstrain_launch_test
set -uo pipefail

if [ -n "${TEST_SRCDIR:-}" ]; then
  launch=$TEST_SRCDIR/pstrain/deploy/k8s/pstrain_launch.sh
else
  launch=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pstrain_launch.sh
fi
tmp=${TEST_TMPDIR:-$(mktemp -d)}
passed=0
failed=0

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
  fi
}
contains() {  # contains NAME NEEDLE HAYSTACK
  if [[ $3 == *"$2"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAIL %s\n  expected to contain: %s\n  actual: %s\n' "$1" "$2" "$3"
  fi
}

# A pod's resolv.conf in namespace "ml" of a cluster whose domain is corp.example.
resolv=$tmp/resolv.conf
cat >"$resolv" <<'EOF'
search ml.svc.corp.example svc.corp.example corp.example
nameserver 10.96.0.10
options ndots:5
EOF

# pod VAR=VALUE... -- ARGS: runs the launcher in a simulated pod (a clean
# environment holding only the VARs), stdout and stderr together.
pod() {
  local vars=()
  while [ "$1" != "--" ]; do vars+=("$1"); shift; done
  shift
  env -i PATH="$PATH" PSTRAIN_RESOLV_CONF="$resolv" "${vars[@]}" "$launch" "$@" 2>&1
}
job_pod() {  # job_pod ROLE INDEX: an Indexed Job's pod
  pod PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=3 POD_NAMESPACE=ml \
    JOB_COMPLETION_INDEX="$2" PSTRAIN_HOSTNAME="pstrain-$1-$2" -- --print "$1"
}
sts_pod() {  # sts_pod ROLE ORDINAL: a StatefulSet's pod (no JOB_COMPLETION_INDEX)
  pod PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=3 POD_NAMESPACE=ml \
    PSTRAIN_HOSTNAME="pstrain-$1-$2" -- --print "$1"
}

# --- Built TF_CONFIG: Indexed Job and StatefulSet pods -----------------------
d=svc.corp.example:2222
cluster="{\"chief\":[\"pstrain-chief-0.pstrain-chief.ml.$d\"],"
cluster+="\"ps\":[\"pstrain-ps-0.pstrain-ps.ml.$d\",\"pstrain-ps-1.pstrain-ps.ml.$d\"],"
cluster+="\"worker\":[\"pstrain-worker-0.pstrain-worker.ml.$d\",\"pstrain-worker-1.pstrain-worker.ml.$d\",\"pstrain-worker-2.pstrain-worker.ml.$d\"]}"
check "indexed job ps 1" "{\"cluster\":$cluster,\"task\":{\"type\":\"ps\",\"index\":1}}" "$(job_pod ps 1)"
check "indexed job chief 0" "{\"cluster\":$cluster,\"task\":{\"type\":\"chief\",\"index\":0}}" "$(job_pod chief 0)"
check "statefulset worker 2" "{\"cluster\":$cluster,\"task\":{\"type\":\"worker\",\"index\":2}}" "$(sts_pod worker 2)"
check "statefulset ps 0" "{\"cluster\":$cluster,\"task\":{\"type\":\"ps\",\"index\":0}}" "$(sts_pod ps 0)"

# Every task of the cluster gets the same cluster (the chief refuses a task
# whose cluster differs) and its own task.
clusters=$(for t in "chief 0" "ps 0" "ps 1" "worker 0" "worker 1" "worker 2"; do
  job_pod $t | jq -c .cluster
done | sort -u)
check "one cluster for all six tasks" "$cluster" "$clusters"

# Names, ports and the cluster domain from the environment.
out=$(pod PSTRAIN_NAME=mnist PSTRAIN_PORT=7000 PSTRAIN_CLUSTER_DOMAIN=k8s.local \
  PSTRAIN_NUM_PS=1 PSTRAIN_NUM_WORKERS=1 POD_NAMESPACE=team-a \
  PSTRAIN_HOSTNAME=mnist-worker-0 JOB_COMPLETION_INDEX=0 -- --print worker)
check "name, port, domain" \
  '{"cluster":{"chief":["mnist-chief-0.mnist-chief.team-a.svc.k8s.local:7000"],"ps":["mnist-ps-0.mnist-ps.team-a.svc.k8s.local:7000"],"worker":["mnist-worker-0.mnist-worker.team-a.svc.k8s.local:7000"]},"task":{"type":"worker","index":0}}' \
  "$out"
# No svc.<domain> entry in the search list: cluster.local.
echo "nameserver 10.0.0.2" >"$tmp/plain.conf"
out=$(env -i PATH="$PATH" PSTRAIN_RESOLV_CONF="$tmp/plain.conf" PSTRAIN_NUM_PS=1 \
  PSTRAIN_NUM_WORKERS=1 POD_NAMESPACE=default PSTRAIN_HOSTNAME=pstrain-ps-0 \
  "$launch" --print ps | jq -r '.cluster.ps[0]')
check "default cluster domain" "pstrain-ps-0.pstrain-ps.default.svc.cluster.local:2222" "$out"
# A cluster without workers (the chief alone with ps tasks) has no worker job.
out=$(pod PSTRAIN_NUM_PS=1 PSTRAIN_NUM_WORKERS=0 POD_NAMESPACE=ml \
  PSTRAIN_HOSTNAME=pstrain-chief-0 -- --print chief | jq -c '.cluster | keys')
check "no workers" '["chief","ps"]' "$out"
# PSTRAIN_NUM_PS=0: no ps job, a collective run (MultiWorkerMirroredStrategy).
out=$(pod PSTRAIN_NUM_PS=0 PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml \
  PSTRAIN_HOSTNAME=pstrain-worker-1 JOB_COMPLETION_INDEX=1 -- --print worker |
  jq -c '[(.cluster | keys), .task.index]')
check "no ps: collective" '[["chief","worker"],1]' "$out"

# --- Errors: exit 2 and one line saying what is wrong ------------------------
expect_error() {  # expect_error NAME MESSAGE VAR=VALUE... -- ARGS
  local name=$1 message=$2
  shift 2
  local out rc
  out=$(pod "$@")
  rc=$?
  check "$name: exit status" 2 "$rc"
  contains "$name: message" "$message" "$out"
}
expect_error "no namespace" "POD_NAMESPACE is not set" \
  PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=2 PSTRAIN_HOSTNAME=pstrain-ps-0 -- --print ps
expect_error "no ps count" "PSTRAIN_NUM_PS is not set" \
  PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml PSTRAIN_HOSTNAME=pstrain-ps-0 -- --print ps
expect_error "bad count" 'PSTRAIN_NUM_WORKERS="two" is not a non-negative integer' \
  PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=two POD_NAMESPACE=ml PSTRAIN_HOSTNAME=pstrain-ps-0 -- --print ps
expect_error "hostname of another job" 'hostname "trainer-ps-1" is not "pstrain-ps-1"' \
  PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml PSTRAIN_HOSTNAME=trainer-ps-1 -- --print ps
expect_error "index out of range" "ps index 2 is out of range: the cluster has 2 ps task(s)" \
  PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml PSTRAIN_HOSTNAME=pstrain-ps-2 -- --print ps
expect_error "no ordinal" 'hostname "trainer" does not end in -<ordinal>' \
  PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml PSTRAIN_HOSTNAME=trainer -- --print ps
expect_error "bad role" 'role "evaluator" is not chief, ps or worker' -- --print evaluator
expect_error "bad port" "PSTRAIN_PORT=70000 is not a port" \
  PSTRAIN_PORT=70000 PSTRAIN_NUM_PS=2 PSTRAIN_NUM_WORKERS=2 POD_NAMESPACE=ml \
  PSTRAIN_HOSTNAME=pstrain-ps-0 -- --print ps

# --- Kubeflow TFJob: the operator's TF_CONFIG, used as it is ----------------
# As the training operator writes it for replica Worker 1 of TFJob "mnist" in
# namespace "kubeflow" (one Service per replica, port 2222).
tfjob='{"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],"ps":["mnist-ps-0.kubeflow.svc:2222","mnist-ps-1.kubeflow.svc:2222"],"worker":["mnist-worker-0.kubeflow.svc:2222","mnist-worker-1.kubeflow.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}'
check "tfjob worker: as it is" "$tfjob" "$(pod TF_CONFIG="$tfjob" -- --print worker)"
expect_error "tfjob: another role" 'task.type is "worker", but this is the ps' \
  TF_CONFIG="$tfjob" -- --print ps
master=${tfjob/\"type\":\"worker\",\"index\":1/\"type\":\"master\",\"index\":0}
check "tfjob: master is the chief" "$master" "$(pod TF_CONFIG="$master" -- --print chief)"
expect_error "tfjob: not JSON" "not JSON with a string task.type" TF_CONFIG="{oops" -- --print worker

# --- Exec: waits for its own name, then runs the binary with TF_CONFIG ------
bin=$tmp/bin
mkdir -p "$bin"
cat >"$bin/worker" <<'EOF'
#!/usr/bin/env bash
echo "binary: $0 $*"
echo "TF_CONFIG=$TF_CONFIG"
EOF
chmod +x "$bin/worker"
cp "$bin/worker" "$bin/ps"
# A TFJob-style TF_CONFIG whose own address resolves at once (localhost).
local_tf='{"cluster":{"chief":["c.invalid:2222"],"worker":["localhost:2222"]},"task":{"type":"worker","index":0},"environment":"cloud"}'
out=$(pod TF_CONFIG="$local_tf" PSTRAIN_BIN_DIR="$bin" -- worker --threads=2 --device=cpu)
check "exec: status" 0 $?
contains "exec: binary and flags" "binary: $bin/worker --threads=2 --device=cpu" "$out"
contains "exec: TF_CONFIG exported" "TF_CONFIG=$local_tf" "$out"
# Its own name in the sparse form of a job.
sparse='{"cluster":{"chief":["c.invalid:2222"],"worker":{"3":"localhost:2222"}},"task":{"type":"worker","index":3}}'
out=$(pod TF_CONFIG="$sparse" PSTRAIN_BIN_DIR="$bin" -- worker)
contains "exec: sparse job" "TF_CONFIG=$sparse" "$out"
# A name that never resolves: gives up after PSTRAIN_WAIT_SECONDS and starts
# the binary anyway (which then reports the address it cannot listen on).
out=$(pod PSTRAIN_NUM_PS=1 PSTRAIN_NUM_WORKERS=1 POD_NAMESPACE=ml PSTRAIN_HOSTNAME=pstrain-ps-0 \
  PSTRAIN_CLUSTER_DOMAIN=invalid PSTRAIN_WAIT_SECONDS=1 PSTRAIN_BIN_DIR="$bin" -- ps)
contains "exec: waits for its name" "waiting for pstrain-ps-0.pstrain-ps.ml.svc.invalid to resolve" "$out"
contains "exec: gives up waiting" "does not resolve after 1s; starting anyway" "$out"
contains "exec: runs the ps" "binary: $bin/ps" "$out"
expect_error "tfjob: no own address" "no address for task" \
  TF_CONFIG='{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":4}}' -- worker

echo "pstrain_launch_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
