#!/usr/bin/env bash
# Builds CoreDNS from the Go module proxy into a cache directory outside the
# repository: the real DNS server the in-cluster DNS tests start with the
# Corefile the engine wrote (job/incluster/coredns), and the one the kind
# node's coredns image carries. Idempotent: when the stamp in the output directory
# names the same versions, it exits at once and prints the binary's path.
#
#   e2e/scripts/coredns-bin.sh [OUTDIR]
#   e2e/scripts/coredns-bin.sh plan [OUTDIR]
#                            builds nothing: prints "current PATH" when the
#                            cached binary is up to date, else "stale PATH"
#
# COREDNS_VERSION defaults to the version kubeadm deploys for K8S_VERSION
# (CoreDNSVersion in k8s.io/kubernetes's cmd/kubeadm/app/constants, read
# from the module the control-plane build already downloads). OUTDIR
# defaults to $COREDNS_DIR or
# ${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}/coredns/<version>.
# The binary's path is the only line on stdout.
set -euo pipefail
plan=
[[ "${1:-}" == plan ]] && { plan=1; shift; }

K8S_VERSION=${K8S_VERSION:-1.37.2}
GO_VERSION=$(go env GOVERSION)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

if [[ -z "${COREDNS_VERSION:-}" ]]; then
  dir=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -d $dir ]] || { echo "coredns-bin: cannot download k8s.io/kubernetes v$K8S_VERSION" >&2; exit 1; }
  COREDNS_VERSION=$(sed -n 's/^[[:space:]]*CoreDNSVersion[[:space:]]*=[[:space:]]*"\(v[^"]*\)".*/\1/p' "$dir/cmd/kubeadm/app/constants/constants.go" | head -n1)
  [[ -n $COREDNS_VERSION ]] || { echo "coredns-bin: no CoreDNSVersion in kubeadm's constants of k8s.io/kubernetes v$K8S_VERSION" >&2; exit 1; }
fi
OUT=${1:-${COREDNS_DIR:-${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}/coredns/$COREDNS_VERSION}}
STAMP="coredns=$COREDNS_VERSION go=$GO_VERSION"

if [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" && -x "$OUT/coredns" ]]; then
  [[ -n $plan ]] && { echo "current $OUT/coredns"; exit 0; }
  echo "coredns-bin: cached in $OUT ($STAMP)" >&2
  echo "$OUT/coredns"
  exit 0
fi
[[ -n $plan ]] && { echo "stale $OUT/coredns"; exit 0; }

mkdir -p "$OUT"
rm -f "$OUT/.stamp"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "coredns-bin: building coredns $COREDNS_VERSION (cold: a few minutes on two cores)" >&2
# A plain module dependency: coredns's own go.mod is not built, only its
# main package, with the plugins of its plugin.cfg at that version.
cd "$work"
printf 'module scratch/coredns\n\ngo 1.24\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > go.mod
printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/coredns/coredns"\n' > tools.go
go mod tidy >/dev/null
go build -trimpath -ldflags '-s -w' -o "$OUT/coredns.tmp" github.com/coredns/coredns
mv "$OUT/coredns.tmp" "$OUT/coredns"
echo "$STAMP" > "$OUT/.stamp"
echo "coredns-bin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)" >&2
echo "$OUT/coredns"
