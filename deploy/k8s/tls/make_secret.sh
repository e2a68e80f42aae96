#!/usr/bin/env bash
# Prints the two Secrets that deploy/k8s/tls mounts: "pstrain-tls", for
# every task (a new cluster CA, ca.crt; one certificate and key that every
# task presents as server and as client, tls.crt and tls.key; a random
# token for --auth_token_file), and "pstrain-chief", for the chief and the
# ps tasks only (chief-token, a second random token for --chief_token_file:
# the ps tasks accept their chief-only calls only with it).
#
#   deploy/k8s/tls/make_secret.sh --namespace ml > deploy/k8s/tls/secret.yaml
#
# The certificate names every address a task of the namespace can have:
# *.<name>-{chief,ps,worker}.<namespace>.svc.<domain> (the Jobs of deploy/k8s)
# and *.<namespace>.svc (Kubeflow TFJob: <job>-<type>-<i>.<namespace>.svc).
# Flags: --namespace (default "default"), --name (PSTRAIN_NAME, default
# "pstrain"), --cluster-domain (cluster.local), --days (365). The CA's key is
# not kept: make a new Secret to add names or renew. Needs openssl.
set -euo pipefail

namespace=default
name=pstrain
domain=cluster.local
days=365
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace) namespace=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --cluster-domain) domain=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    *) echo "make_secret.sh: unknown argument \"$1\"" >&2; exit 2 ;;
  esac
done

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
quiet() { "$@" 2>/dev/null || { echo "make_secret.sh: failed: $*" >&2; exit 1; }; }

quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout ca.key -out ca.crt -days "$days" -subj "/CN=pstrain cluster CA ($namespace)" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign"
sans="DNS:*.$name-chief.$namespace.svc.$domain,DNS:*.$name-ps.$namespace.svc.$domain"
sans+=",DNS:*.$name-worker.$namespace.svc.$domain,DNS:*.$namespace.svc"
quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout tls.key -out tls.csr -subj "/CN=$name.$namespace"
cat >ext.cnf <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans
EOF
quiet openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
  -days "$days" -extfile ext.cnf -out tls.crt
quiet openssl rand -hex 32 >token
quiet openssl rand -hex 32 >chief-token

# secret NAME FILE...: a Secret holding FILE... under their names.
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
  for f in "$@"; do echo "  $f: $(base64 -w0 <"$f")"; done
}
echo "# Made by deploy/k8s/tls/make_secret.sh for namespace $namespace: keep it"
echo "# out of git."
secret pstrain-tls ca.crt tls.crt tls.key token
echo "---"
secret pstrain-chief chief-token
