#!/usr/bin/env bash
# Builds Kubernetes commands from the Go module proxy into OUTDIR:
#
#   e2e/scripts/k8s-build.sh VERSION OUTDIR COMMAND...   (e.g. 1.34.4 out kubectl kubelet)
#
# k8s.io/kubernetes replaces its staging modules with ./staging paths that
# its module zip does not carry, so it cannot be built where it is
# downloaded. A scratch module that requires it and points each staging
# module at its published v0.<minor>.<patch> builds from the proxy alone.
# Both the control-plane tests (k8s-testbin.sh) and the kind node
# (e2e/kind/bins.sh) build with this one recipe.
set -euo pipefail
version=$1 out=$2
shift 2
(( $# > 0 )) || { echo "usage: $0 VERSION OUTDIR COMMAND..." >&2; exit 2; }
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

mod=$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module scratch/k8s"
  go mod edit -json "$mod" | sed -n 's/^\t"Go": "\(.*\)",/go \1/p'
  grep '^godebug' "$mod" | sort -u || true
  echo "require k8s.io/kubernetes v$version"
  echo "replace ("
  go mod edit -json "$mod" | tr -d ' \t\n' | grep -o '"Old":{"Path":"[^"]*"},"New":{"Path":"\./staging/' \
    | sed 's/"Old":{"Path":"\([^"]*\)".*/\t\1 => \1 v0.'"${version#1.}"'/'
  echo ")"
} > go.mod
pkgs=()
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in "$@"; do
    printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"
    pkgs+=("k8s.io/kubernetes/cmd/$c")
  done
  printf ')\n'
} > tools.go
go mod tidy >/dev/null
v=k8s.io/component-base/version
mkdir -p bin
go build -trimpath -ldflags "-s -w -X $v.gitVersion=v$version -X $v.gitMajor=1 -X $v.gitMinor=$(cut -d. -f2 <<<"$version") -X $v.gitTreeState=clean" \
  -o bin/ "${pkgs[@]}"
mkdir -p "$out"
mv bin/* "$out/"
