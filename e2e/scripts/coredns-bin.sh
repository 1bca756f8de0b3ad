#!/usr/bin/env bash
# Builds CoreDNS from the Go module proxy into a cache directory outside the
# repository: the real DNS server the in-cluster DNS tests start with the
# Corefile the engine wrote (job/incluster/coredns), and the one the kind
# node's coredns image carries. Idempotent: when the stamp in the output directory
# names the same versions, it exits at once and prints the binary's path.
#
# The binary carries every plugin of CoreDNS's plugin.cfg at that version but
# those that talk to systems no test has and cost most of a cold build (the
# clouds' DNS services, etcd, nomad, tracing, dnstap, gRPC forwarding, DNSSEC
# signing and zone transfers): NO_PLUGINS lists them. The ones clusters'
# Corefiles use (kubeadm's, AKS's with its import of coredns-custom, a
# customer's log or whoami) are all in. Cold on two cores: 128 s, against
# 196 s with every plugin.
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
NO_PLUGINS=${NO_PLUGINS:-"azure route53 clouddns etcd nomad trace dnstap geoip quic https3 grpc_server grpc sign tsig dnssec secondary auto transfer k8s_external erratic"}
STAMP="coredns=$COREDNS_VERSION go=$GO_VERSION without=${NO_PLUGINS// /,}"

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
echo "coredns-bin: building coredns $COREDNS_VERSION (cold: about 1.5–2 min on two cores)" >&2
# A plain module dependency: coredns's own go.mod is not built, only a main
# package like its own, importing the plugins of its plugin.cfg (name:path,
# a bare path is under plugin/) less NO_PLUGINS. The order plugins run in is
# CoreDNS's (core/dnsserver's directive list), whatever the imports' order.
cd "$work"
printf 'module scratch/coredns\n\ngo 1.24\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > go.mod
cfg=$(go mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/plugin.cfg
[[ -f $cfg ]] || { echo "coredns-bin: no plugin.cfg in github.com/coredns/coredns $COREDNS_VERSION" >&2; exit 1; }
{
  printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n\n'
  grep -v '^[[:space:]]*#' "$cfg" | grep ':' | while IFS=: read -r name path; do
    [[ " $NO_PLUGINS " == *" $name "* ]] && continue
    [[ $path == */* ]] || path=github.com/coredns/coredns/plugin/$path
    printf '\t_ "%s"\n' "$path"
  done
  printf ')\n\nfunc main() { coremain.Run() }\n'
} > main.go
go mod tidy >/dev/null
go build -trimpath -ldflags '-s -w' -o "$OUT/coredns.tmp" .
mv "$OUT/coredns.tmp" "$OUT/coredns"
echo "$STAMP" > "$OUT/.stamp"
echo "coredns-bin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)" >&2
echo "$OUT/coredns"
