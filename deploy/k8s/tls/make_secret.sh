#!/usr/bin/env bash
# Prints the Secrets that deploy/k8s/tls mounts:
#   - "pstrain-tls", for every task: a new cluster CA (ca.crt) and a random
#     token for --auth_token_file (token);
#   - "pstrain-tls-chief", "pstrain-tls-ps", "pstrain-tls-worker", one per
#     role, each mounted by that role's tasks only: a certificate and key that
#     the role's tasks present as server and as client (tls.crt, tls.key),
#     naming the role's addresses only;
#   - "pstrain-chief", for the chief and the ps tasks only: chief-token, a
#     second random token for --chief_token_file.
# A ps task takes a caller as the chief only if its certificate names the
# chief's TF_CONFIG host (or it sends the chief's token): the workers' and
# the ps tasks' certificates name no chief address, so neither can call the
# chief-only methods (CreateVariables, Save, Restore, SetWorkers).
#
#   deploy/k8s/tls/make_secret.sh --namespace ml > deploy/k8s/tls/secret.yaml
#
# Role R's certificate names *.<name>-R.<namespace>.svc.<domain> (the Jobs of
# deploy/k8s) and <name>-R-<i>.<namespace>.svc for i < --max_replicas
# (Kubeflow TFJob's addresses; the chief's for i = 0 only).
# Flags: --namespace (default "default"), --name (PSTRAIN_NAME and the
# TFJob's name, default "pstrain"), --cluster-domain (cluster.local), --days
# (365), --max_replicas (16). The CA's key is not kept: make new Secrets to
# add names or renew. Needs openssl.
set -euo pipefail

namespace=default
name=pstrain
domain=cluster.local
days=365
max_replicas=16
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace) namespace=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cluster-domain) domain=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --max_replicas) max_replicas=$2; shift 2 ;;
    *) echo "make_secret.sh: unknown argument \"$1\"" >&2; exit 2 ;;
  esac
done
case "$max_replicas" in
  [1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;;
  *) echo "make_secret.sh: --max_replicas must be 1 to 999, not \"$max_replicas\"" >&2; exit 2 ;;
esac

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
quiet() { "$@" 2>/dev/null || { echo "make_secret.sh: failed: $*" >&2; exit 1; }; }

quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout ca.key -out ca.crt -days "$days" -subj "/CN=pstrain cluster CA ($namespace)" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
# certificate ROLE REPLICAS: ROLE/tls.crt and ROLE/tls.key, naming ROLE's
# addresses.
certificate() {
  local role=$1 replicas=$2 i
  mkdir "$role"
  local sans="DNS:*.$name-$role.$namespace.svc.$domain"
  for ((i = 0; i < replicas; i++)); do sans+=",DNS:$name-$role-$i.$namespace.svc"; done
  quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$role/tls.key" -out "$role/tls.csr" -subj "/CN=$name-$role.$namespace"
  cat >"$role/ext.cnf" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans
EOF
  quiet openssl x509 -req -in "$role/tls.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days "$days" -extfile "$role/ext.cnf" -out "$role/tls.crt"
}
certificate chief 1
certificate ps "$max_replicas"
certificate worker "$max_replicas"
quiet openssl rand -hex 32 >token
quiet openssl rand -hex 32 >chief-token

# secret NAME FILE...: a Secret holding FILE... under their base names.
secret() {
  cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $namespace
  labels:
    app.kubernetes.io/name: pstrain
    app.kubernetes.io/instance: $name
type: Opaque
data:
EOF
  shift
  for f in "$@"; do echo "  ${f##*/}: $(base64 -w0 <"$f")"; done
}
echo "# Made by deploy/k8s/tls/make_secret.sh for namespace $namespace: keep it"
echo "# out of git."
secret pstrain-tls ca.crt token
for role in chief ps worker; do
  echo "---"
  secret "pstrain-tls-$role" "$role/tls.crt" "$role/tls.key"
done
echo "---"
secret pstrain-chief chief-token
