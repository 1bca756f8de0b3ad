#!/usr/bin/env bash
# Builds the real Kubernetes control plane used by the real-control-plane tests
# (etcd, kube-apiserver, kube-controller-manager, kubectl) from the Go module
# proxy, into a cache directory outside the repository. Idempotent: when the
# stamp in the output directory names the same versions, it exits at once.
#
#   e2e/scripts/k8s-testbin.sh [OUTDIR]
#
# OUTDIR defaults to $K8S_TESTBIN or
# ${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine/k8s-testbin/v$K8S_VERSION.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.34.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
GO_VERSION=$(go env GOVERSION)
OUT=${1:-${K8S_TESTBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine/k8s-testbin/v$K8S_VERSION}}
STAMP="k8s=$K8S_VERSION etcd=$ETCD_VERSION go=$GO_VERSION"

if [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" ]]; then
  for b in etcd kube-apiserver kube-controller-manager kubectl; do
    [[ -x "$OUT/$b" ]] || { echo "k8s-testbin: $OUT/$b missing, rebuilding" >&2; rm -f "$OUT/.stamp"; break; }
  done
  [[ -f "$OUT/.stamp" ]] && { echo "k8s-testbin: cached in $OUT ($STAMP)"; exit 0; }
fi

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
start=$(date +%s)

echo "k8s-testbin: building etcd $ETCD_VERSION" >&2
mkdir -p "$work/etcd" && cd "$work/etcd"
printf 'module scratch/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" > go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
go mod tidy >/dev/null
go build -trimpath -ldflags='-s -w' -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3
mv "$OUT/etcd.tmp" "$OUT/etcd"

echo "k8s-testbin: building kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION" >&2
mkdir -p "$work/k8s" && cd "$work/k8s"
# k8s.io/kubernetes replaces its staging modules with ./staging paths that the
# module zip does not carry; a scratch module that requires it and points each
# staging module at its published v0.x version builds from the proxy alone.
MOD=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module scratch/k8s"
  go mod edit -json "$MOD" | sed -n 's/^\t"Go": "\(.*\)",/go \1/p'
  grep '^godebug' "$MOD" | sort -u || true
  echo "require k8s.io/kubernetes v$K8S_VERSION"
  echo "replace ("
  go mod edit -json "$MOD" | tr -d ' \t\n' | grep -o '"Old":{"Path":"[^"]*"},"New":{"Path":"\./staging/' \
    | sed 's/"Old":{"Path":"\([^"]*\)".*/\t\1 => \1 v0.'"${K8S_VERSION#1.}"'/'
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
go mod tidy >/dev/null
MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
V=k8s.io/component-base/version
mkdir -p "$work/bin"
go build -trimpath -ldflags "-s -w -X $V.gitVersion=v$K8S_VERSION -X $V.gitMajor=1 -X $V.gitMinor=$MINOR -X $V.gitTreeState=clean" \
  -o "$work/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
mv "$work/bin/"* "$OUT/"
echo "$STAMP" > "$OUT/.stamp"
echo "k8s-testbin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)"
