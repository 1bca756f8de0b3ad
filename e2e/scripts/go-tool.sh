#!/usr/bin/env bash
# Builds one pinned Go tool once into the cache: `go install PKG@VERSION`
# into a temporary directory beside OUT, then moved to OUT, so that an
# interrupted build never leaves a half-written binary that a later run
# would trust. Exits at once when OUT is already there.
#
#   e2e/scripts/go-tool.sh PKG@VERSION OUT
#
# OUT names the version and the Go toolchain (the Makefile's TOOLS_DIR
# paths do): a tool built by an older Go cannot analyse newer Go code.
set -euo pipefail
pkg=${1:?usage: go-tool.sh PKG@VERSION OUT}
out=${2:?usage: go-tool.sh PKG@VERSION OUT}
[[ -x $out ]] && exit 0
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$out.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "go-tool: building $pkg into $out" >&2
GOBIN=$tmp GOTOOLCHAIN=local CGO_ENABLED=0 go install "$pkg"
name=${pkg%@*}
mv "$tmp/${name##*/}" "$out"
