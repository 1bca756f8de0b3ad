#!/usr/bin/env bash
# Builds the real Kubernetes control plane used by the real-control-plane tests
# (etcd, kube-apiserver, kube-controller-manager, kubectl) from the Go module
# proxy, into a cache directory outside the repository. Idempotent: when the
# stamp in the output directory names the same versions, it exits at once.
#
#   e2e/scripts/k8s-testbin.sh [OUTDIR]
#   e2e/scripts/k8s-testbin.sh plan [OUTDIR]
#                            builds nothing: prints "current OUTDIR" when the
#                            cached binaries are up to date, else "stale OUTDIR"
#
# OUTDIR defaults to $K8S_TESTBIN or
# ${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine/k8s-testbin/v$K8S_VERSION.
# etcd does not follow the Kubernetes version: it is built once per
# ETCD_VERSION into $ETCD_DIR (default $CACHE_DIR/etcd/v$ETCD_VERSION) and
# copied into every OUTDIR, so the LTS testbin and the kind node reuse it.
set -euo pipefail
plan=
[[ "${1:-}" == plan ]] && { plan=1; shift; }
here=$(cd "$(dirname "$0")" && pwd)

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
GO_VERSION=$(go env GOVERSION)
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
OUT=${1:-${K8S_TESTBIN:-$CACHE_DIR/k8s-testbin/v$K8S_VERSION}}
ETCD_DIR=${ETCD_DIR:-$CACHE_DIR/etcd/v$ETCD_VERSION}
STAMP="k8s=$K8S_VERSION etcd=$ETCD_VERSION go=$GO_VERSION"

current() {
  [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" ]] || return 1
  local b
  for b in etcd kube-apiserver kube-controller-manager kubectl; do
    [[ -x "$OUT/$b" ]] || { echo "k8s-testbin: $OUT/$b missing" >&2; return 1; }
  done
}
if current; then
  [[ -n $plan ]] && { echo "current $OUT"; exit 0; }
  echo "k8s-testbin: cached in $OUT ($STAMP)"
  exit 0
fi
[[ -n $plan ]] && { echo "stale $OUT"; exit 0; }
rm -f "$OUT/.stamp"

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
start=$(date +%s)

etcd_stamp="etcd=$ETCD_VERSION go=$GO_VERSION"
mkdir -p "$ETCD_DIR"
(
  # Two testbins built at once (two make runs) build etcd once.
  exec 9>"$ETCD_DIR/.lock"
  command -v flock >/dev/null && flock 9
  if [[ -x "$ETCD_DIR/etcd" && -f "$ETCD_DIR/.stamp" && "$(cat "$ETCD_DIR/.stamp")" == "$etcd_stamp" ]]; then
    echo "k8s-testbin: etcd $ETCD_VERSION cached in $ETCD_DIR" >&2
    exit 0
  fi
  echo "k8s-testbin: building etcd $ETCD_VERSION" >&2
  rm -f "$ETCD_DIR/.stamp"
  mkdir -p "$work/etcd" && cd "$work/etcd"
  printf 'module scratch/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy >/dev/null
  go build -trimpath -ldflags='-s -w' -o "$ETCD_DIR/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$ETCD_DIR/etcd.tmp" "$ETCD_DIR/etcd"
  echo "$etcd_stamp" > "$ETCD_DIR/.stamp"
)
cp "$ETCD_DIR/etcd" "$OUT/etcd.tmp"
mv "$OUT/etcd.tmp" "$OUT/etcd"

echo "k8s-testbin: building kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION" >&2
"$here/k8s-build.sh" "$K8S_VERSION" "$OUT" kube-apiserver kube-controller-manager kubectl
echo "$STAMP" > "$OUT/.stamp"
echo "k8s-testbin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)"
