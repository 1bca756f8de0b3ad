#!/usr/bin/env bash
# Assembles the directory Microsoft's container-package-app turns into the
# Marketplace bundle: manifest.yaml, mainTemplate.json, createUiDefinition.json
# and a copy of the chart whose values.yaml is manifests/marketplace/values.yaml
# with the image filled in.
#
#   REGISTRY_SERVER=suse.azurecr.io ENGINE_IMAGE=rancher/registration-engine \
#   ENGINE_DIGEST=sha256:… manifests/marketplace/stage.sh OUTDIR
#
# ENGINE_REGISTRY defaults to REGISTRY_SERVER. Then, in Microsoft's packaging
# image: cd OUTDIR && cpa verify && cpa buildbundle.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
: "${REGISTRY_SERVER:?the Azure Container Registry of the publisher, e.g. suse.azurecr.io}"
: "${ENGINE_IMAGE:?the repository of the engine in it, e.g. rancher/registration-engine}"
: "${ENGINE_DIGEST:?the digest of the engine image, sha256:…}"
ENGINE_REGISTRY=${ENGINE_REGISTRY:-$REGISTRY_SERVER}
[[ $ENGINE_DIGEST =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "ENGINE_DIGEST must be sha256:<64 hex>, got $ENGINE_DIGEST" >&2; exit 2; }

mkdir -p "$out"
rm -rf "$out/registration-engine"
cp -R "$here/../chart/registration-engine" "$out/registration-engine"
subst() {
  sed -e "s|@REGISTRY_SERVER@|$REGISTRY_SERVER|g" -e "s|@ENGINE_REGISTRY@|$ENGINE_REGISTRY|g" \
      -e "s|@ENGINE_IMAGE@|$ENGINE_IMAGE|g" -e "s|@ENGINE_DIGEST@|$ENGINE_DIGEST|g" "$1"
}
subst "$here/values.yaml" > "$out/registration-engine/values.yaml"
subst "$here/manifest.yaml" > "$out/manifest.yaml"
cp "$here/mainTemplate.json" "$here/createUiDefinition.json" "$out/"
if ! compgen -G "$out/registration-engine/certs/*.pem" >/dev/null; then
  echo "stage: WARNING: no certs/*.pem in the chart: every region server will be skipped (see certs/README.md)" >&2
fi
echo "stage: bundle directory ready in $out"
