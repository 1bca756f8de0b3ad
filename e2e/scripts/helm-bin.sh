#!/usr/bin/env bash
# Builds helm from the Go module proxy into a cache directory outside the
# repository, for the chart tests (helm lint, helm template, helm install
# against the real-control-plane tier). Idempotent: when the stamp in the
# output directory names the same versions, it exits at once.
#
#   e2e/scripts/helm-bin.sh [OUTDIR]
#
# OUTDIR defaults to $HELM_DIR or
# ${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine/helm/v$HELM_VERSION.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-3.22.0}
GO_VERSION=$(go env GOVERSION)
OUT=${1:-${HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine/helm/v$HELM_VERSION}}
STAMP="helm=$HELM_VERSION go=$GO_VERSION"

if [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" && -x "$OUT/helm" ]]; then
  echo "helm-bin: cached in $OUT ($STAMP)"
  exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT/.stamp"
export GOTOOLCHAIN=local CGO_ENABLED=0
start=$(date +%s)
echo "helm-bin: building helm $HELM_VERSION (a few minutes on two cores)" >&2
# The version helm prints (helm version) is a linker variable; go install
# of a tagged module does not set it.
GOBIN="$OUT" go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
"$OUT/helm" version --short >/dev/null
echo "$STAMP" > "$OUT/.stamp"
echo "helm-bin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)"
