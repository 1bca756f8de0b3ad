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
STAMP="helm=$HELM_VERSION go=$GO_VERSION ldflags=2"

if [[ -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$STAMP" && -x "$OUT/helm" ]]; then
  echo "helm-bin: cached in $OUT ($STAMP)"
  exit 0
fi

mkdir -p "$OUT"
rm -f "$OUT/.stamp"
export GOTOOLCHAIN=local CGO_ENABLED=0
start=$(date +%s)
echo "helm-bin: building helm $HELM_VERSION (a few minutes on two cores)" >&2
# What helm's own Makefile sets at link time and go install of a tagged
# module does not: the version helm prints, and the Kubernetes version that
# helm template and helm lint assume without a cluster (1.<client-go minor>,
# else 1.20, which a chart's kubeVersion refuses).
mod=$(go mod download -json "helm.sh/helm/v3@v$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
k8s_minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$mod" | head -n1)
[[ -n $k8s_minor ]] || { echo "helm-bin: no k8s.io/client-go in $mod" >&2; exit 1; }
ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ld+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
GOBIN="$OUT" go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
"$OUT/helm" version --short >/dev/null
echo "$STAMP" > "$OUT/.stamp"
echo "helm-bin: built in $(( $(date +%s) - start ))s into $OUT ($STAMP)"
