#!/usr/bin/env bash
# Builds Azure Workload Identity's mutating webhook (the "manager" of
# github.com/Azure/azure-workload-identity, cmd/webhook), the one AKS runs
# for --enable-workload-identity, at one release ($AZWI_VERSION) from the Go
# module proxy into a cache directory outside the repository, for the kind
# tier (e2e/kind/run.sh calls it once per release of AZWI_VERSIONS in
# e2e/kind/lib.sh; e2e/kind/images.sh packs each into
# local/azwi-webhook:v<version>). Static (CGO off), with the
# version its release images print. Idempotent: when the stamp in the output
# directory names the same versions, it prints the binary's path at once.
#
#   e2e/scripts/azwi-webhook.sh          build (or reuse); print the binary
#   e2e/scripts/azwi-webhook.sh plan     "current PATH" or "stale PATH",
#                                        building nothing
#
# The output directory is $AZWI_DIR or
# ${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}/azwi-webhook/v$AZWI_VERSION.
set -euo pipefail

# By default the newest release on the Go module proxy (its version list is
# not served; the tags v1.6.0, v1.5.1 and v1.3.0 are, v1.6.x after it not
# yet); the kind tier asks for each of lib.sh's AZWI_VERSIONS.
AZWI_VERSION=${AZWI_VERSION:-1.6.0}
GO_VERSION=$(go env GOVERSION)
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
OUT=${AZWI_DIR:-$CACHE_DIR/azwi-webhook/v$AZWI_VERSION}
STAMP="azwi=$AZWI_VERSION go=$GO_VERSION mlog=$(cat "$(dirname "$0")/../kind/azwi-mlog/"* | sha256sum | cut -c1-16) ldflags=1"
BIN=$OUT/manager

current() { [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" && -x "$BIN" ]]; }
if [[ "${1:-}" == plan ]]; then
  if current; then echo "current $BIN"; else echo "stale $BIN"; fi
  exit 0
fi
if current; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT/.stamp"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
start=$(date +%s)
echo "azwi-webhook: building github.com/Azure/azure-workload-identity/cmd/webhook v$AZWI_VERSION" >&2
# Built inside a copy of the module, with its own go.mod and go.sum: go
# install MODULE@VERSION would first read the module's version list for a
# deprecation notice, which the proxy refuses (403) for this module.
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
src=$(go mod download -json "github.com/Azure/azure-workload-identity@v$AZWI_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[[ -d "$src" ]] || { echo "azwi-webhook: the module did not download" >&2; exit 1; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
# monis.app/mlog, its logging library, is not on the proxy (403 for every
# version): our stand-in with the functions the webhook calls takes its
# place. The webhook's own code, what it does to a pod, is the release's.
mlog=$(cd "$(dirname "$0")/../kind/azwi-mlog" && pwd)
(cd "$work/src" && go mod edit -replace "monis.app/mlog=$mlog")
# What the project's Makefile sets at link time (the version the webhook
# logs in its user agent and, from v1.6.0, prints with --version).
v=github.com/Azure/azure-workload-identity/pkg/version
ld="-s -w -X $v.BuildVersion=v$AZWI_VERSION -X $v.Vcs=v$AZWI_VERSION"
(cd "$work/src" && go build -trimpath -ldflags "$ld" -o "$BIN" ./cmd/webhook)
# v1.5.1 has no --version flag (it exits 2 "flag provided but not
# defined"), and -trimpath keeps -ldflags out of `go version -m`: such a
# release is checked by the kind tier, which reads the version from the
# user agent the running webhook logs.
if out=$("$BIN" --version 2>/dev/null); then
  grep -q "\"buildVersion\":\"v$AZWI_VERSION\"" <<<"$out" || { echo "azwi-webhook: $BIN --version does not say v$AZWI_VERSION: $out" >&2; exit 1; }
fi
echo "$STAMP" > "$OUT/.stamp"
echo "azwi-webhook: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)" >&2
echo "$BIN"
