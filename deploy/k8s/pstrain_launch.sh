#!/usr/bin/env bash
# pstrain-launch: starts a pstrain binary in a Kubernetes pod (the image
# installs this file as /usr/local/bin/pstrain-launch).
#
#   pstrain-launch ROLE [FLAG...]     ROLE: chief, ps or worker
#   pstrain-launch --print ROLE       prints the TF_CONFIG it would use
#
# TF_CONFIG comes from one of two places:
#   - Kubeflow's TFJob operator (or anyone else) set it: it is used as it is;
#     its task type must be ROLE (the chief may be "master").
#   - It is not set: it is built from this pod's index and the DNS names of
#     the headless Services of deploy/k8s/: task i of ROLE is
#       $PSTRAIN_NAME-ROLE-i.$PSTRAIN_NAME-ROLE.$POD_NAMESPACE.svc.<domain>:$PSTRAIN_PORT
#     which is the name Kubernetes gives pod "$PSTRAIN_NAME-ROLE-i" of an
#     Indexed Job (or StatefulSet) named "$PSTRAIN_NAME-ROLE" whose pods have
#     subdomain "$PSTRAIN_NAME-ROLE". The index is $JOB_COMPLETION_INDEX
#     (Indexed Job), else the number ending the hostname (StatefulSet).
#     Environment: PSTRAIN_NUM_PS (0: no "ps" job, a collective run),
#     PSTRAIN_NUM_WORKERS (both required),
#     POD_NAMESPACE (required, from the downward API), PSTRAIN_NAME (default
#     pstrain), PSTRAIN_PORT (2222), PSTRAIN_CLUSTER_DOMAIN (default: read
#     from the "svc.<domain>" entry of /etc/resolv.conf's search list, else
#     cluster.local).
# Then it waits (up to $PSTRAIN_WAIT_SECONDS, default 300) until this task's
# own host name resolves, since the binary listens on the address of its
# TF_CONFIG entry and a pod's DNS record appears a moment after it starts,
# and execs $PSTRAIN_BIN_DIR/ROLE (default /usr/local/bin) with the FLAGs.
#
# Exits 2 with one line saying what is wrong on a bad role, TF_CONFIG or
# environment. Needs bash, jq and getent.
set -euo pipefail

die() {
  echo "pstrain-launch: $*" >&2
  exit 2
}

print_only=0
if [ "${1:-}" = "--print" ]; then
  print_only=1
  shift
fi
case "${1:-}" in
  chief | ps | worker) role=$1; shift ;;
  -h | --help | "")
    sed -n '2,30s/^# \{0,1\}//p' "$0"
    [ -n "${1:-}" ] && exit 0
    exit 2
    ;;
  *) die "role \"$1\" is not chief, ps or worker" ;;
esac
command -v jq >/dev/null || die "needs jq"

# A non-negative integer from the environment variable $1 (default $2).
count() {
  local value=${!1:-${2:-}}
  [ -n "$value" ] || die "$1 is not set"
  [[ $value =~ ^[0-9]+$ ]] || die "$1=\"$value\" is not a non-negative integer"
  echo "$((10#$value))"
}

# The cluster domain: the "svc.<domain>" entry of the resolver's search list.
cluster_domain() {
  if [ -n "${PSTRAIN_CLUSTER_DOMAIN:-}" ]; then
    echo "$PSTRAIN_CLUSTER_DOMAIN"
    return
  fi
  local entry
  for entry in $(awk '$1 == "search" { $1 = ""; print }' \
      "${PSTRAIN_RESOLV_CONF:-/etc/resolv.conf}" 2>/dev/null); do
    if [[ $entry == svc.* ]]; then
      echo "${entry#svc.}"
      return
    fi
  done
  echo cluster.local
}

build_tf_config() {
  local name=${PSTRAIN_NAME:-pstrain}
  local num_ps num_workers port namespace domain index host
  num_ps=$(count PSTRAIN_NUM_PS)
  num_workers=$(count PSTRAIN_NUM_WORKERS)
  port=$(count PSTRAIN_PORT 2222)
  [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || die "PSTRAIN_PORT=$port is not a port"
  namespace=${POD_NAMESPACE:-}
  [ -n "$namespace" ] || die "POD_NAMESPACE is not set (set it from the downward API: metadata.namespace)"
  [[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "PSTRAIN_NAME=\"$name\" is not a DNS label"
  domain=$(cluster_domain)
  host=${PSTRAIN_HOSTNAME:-$(hostname)}
  if [ -n "${JOB_COMPLETION_INDEX:-}" ]; then
    index=$(count JOB_COMPLETION_INDEX)
  elif [[ $host =~ -([0-9]+)$ ]]; then
    index=$((10#${BASH_REMATCH[1]}))
  else
    die "no task index: JOB_COMPLETION_INDEX is not set and hostname \"$host\" does not end in -<ordinal>"
  fi
  # The DNS name built below is this pod's only if its hostname is the one
  # the Job or StatefulSet gives it.
  [ "$host" = "$name-$role-$index" ] ||
    die "hostname \"$host\" is not \"$name-$role-$index\": name the Job (or StatefulSet) \"$name-$role\", or set PSTRAIN_NAME"
  local tasks
  case $role in
    chief) tasks=1 ;;
    ps) tasks=$num_ps ;;
    worker) tasks=$num_workers ;;
  esac
  [ "$index" -lt "$tasks" ] || die "$role index $index is out of range: the cluster has $tasks $role task(s)"
  jq -cn --arg name "$name" --arg ns "$namespace" --arg domain "$domain" \
    --argjson port "$port" --argjson ps "$num_ps" --argjson workers "$num_workers" \
    --arg role "$role" --argjson index "$index" '
    def addresses($job; $n):
      [range($n) | "\($name)-\($job)-\(.).\($name)-\($job).\($ns).svc.\($domain):\($port)"];
    {cluster: ({chief: addresses("chief"; 1)}
               + (if $ps > 0 then {ps: addresses("ps"; $ps)} else {} end)
               + (if $workers > 0 then {worker: addresses("worker"; $workers)} else {} end)),
     task: {type: $role, index: $index}}'
}

if [ -n "${TF_CONFIG:-}" ]; then
  tf_config=$TF_CONFIG
  type=$(jq -er '.task.type | strings' <<<"$tf_config" 2>/dev/null) ||
    die "TF_CONFIG: not JSON with a string task.type: $tf_config"
  [ "$type" = "$role" ] || { [ "$role" = chief ] && [ "$type" = master ]; } ||
    die "TF_CONFIG: task.type is \"$type\", but this is the $role"
else
  tf_config=$(build_tf_config)
fi

if [ $print_only -eq 1 ]; then
  echo "$tf_config"
  exit 0
fi

# This task's own address: cluster[type][index], in the list or the sparse
# {"<index>": address} form.
own=$(jq -er '.task as $t | .cluster[$t.type]
               | if type == "object" then .[$t.index | tostring] else .[$t.index] end
               | strings' <<<"$tf_config" 2>/dev/null) ||
  die "TF_CONFIG: no address for task $(jq -c .task <<<"$tf_config" 2>/dev/null)"
own_host=${own%:*}
own_host=${own_host#[}
own_host=${own_host%]}
wait_seconds=$(count PSTRAIN_WAIT_SECONDS 300)
start=$SECONDS
until getent hosts "$own_host" >/dev/null; do
  # Said first: one slow lookup may already use up the wait.
  [ -z "${waiting:-}" ] && echo "pstrain-launch: waiting for $own_host to resolve" >&2
  waiting=1
  if [ $((SECONDS - start)) -ge "$wait_seconds" ]; then
    echo "pstrain-launch: $own_host does not resolve after ${wait_seconds}s; starting anyway" >&2
    break
  fi
  sleep 1
done

export TF_CONFIG=$tf_config
echo "pstrain-launch: $role: TF_CONFIG=$TF_CONFIG" >&2
exec "${PSTRAIN_BIN_DIR:-/usr/local/bin}/$role" "$@"
