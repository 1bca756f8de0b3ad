#!/usr/bin/env bash
# Assembles the directory Microsoft's container-package-app turns into the
# Marketplace bundle: manifest.yaml, mainTemplate.json, createUiDefinition.json
# and a copy of the chart whose values.yaml is manifests/marketplace/values.yaml
# with the image filled in.
#
#   REGISTRY_SERVER=suse.azurecr.io ENGINE_IMAGE=rancher/registration-engine \
#   ENGINE_DIGEST=sha256:… OFFER_PUBLISHER_ID=suse OFFER_ID=… \
#   manifests/marketplace/stage.sh OUTDIR
#
# OFFER_PUBLISHER_ID and OFFER_ID are Partner Center's IDs of the offer the
# bundle is published in: the engine compares them with the extension's
# plan in ARM. Azure injects neither, and `az k8s-extension create` does not
# run mainTemplate.json (which passes them on the portal's path), so the
# bundle's values carry them. The offer must use the custom-meter billing
# model: Azure injects the extension's identity, plan and ID
# (global.azure.*) only for it.
#
# ENGINE_REGISTRY defaults to REGISTRY_SERVER. REGION_SERVER_CERTS names a
# directory of <regionsrv entry>.pem files (regionServiceCertsAzure's
# /usr/lib/regionService/certs, see the chart's certs/README.md) copied into
# the bundle's chart; without it the chart's certs/ must hold them. A bundle
# lacking the certificate of any region server is refused: no manual step can
# add one to a Marketplace install, and the engine skips a server it cannot
# pin. CHART_DIR (default the repository's chart) and VERSION (the bundle's
# version, default manifest.yaml's) are what hack/release.sh passes. Then, in
# Microsoft's packaging image: cd OUTDIR && cpa verify && cpa buildbundle.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: $0 OUTDIR}
: "${REGISTRY_SERVER:?the Azure Container Registry of the publisher, e.g. suse.azurecr.io}"
: "${ENGINE_IMAGE:?the repository of the engine in it, e.g. rancher/registration-engine}"
: "${ENGINE_DIGEST:?the digest of the engine image, sha256:…}"
: "${OFFER_PUBLISHER_ID:?the publisher ID of the offer in Partner Center, as in the plan URN publisher:offer:plan}"
: "${OFFER_ID:?the ID in Partner Center of the offer the bundle is published in}"
# Marketplace IDs: lower-case letters, digits, - and _ (Partner Center's rule).
for v in OFFER_PUBLISHER_ID OFFER_ID; do
  [[ ${!v} =~ ^[a-z0-9][a-z0-9_-]{0,49}$ ]] || { echo "stage: $v must be a Partner Center ID (lower-case letters, digits, - and _), got ${!v}" >&2; exit 2; }
done
ENGINE_REGISTRY=${ENGINE_REGISTRY:-$REGISTRY_SERVER}
[[ $ENGINE_DIGEST =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "ENGINE_DIGEST must be sha256:<64 hex>, got $ENGINE_DIGEST" >&2; exit 2; }

chart=${CHART_DIR:-$here/../chart/registration-engine}
if [[ -n ${VERSION:-} && ! $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "stage: VERSION must be #.#.#, got $VERSION" >&2; exit 2
fi

mkdir -p "$out"
rm -rf "$out/registration-engine"
cp -R "$chart" "$out/registration-engine"
if [[ -n ${REGION_SERVER_CERTS:-} ]]; then
  compgen -G "$REGION_SERVER_CERTS/*.pem" >/dev/null || { echo "stage: REGION_SERVER_CERTS=$REGION_SERVER_CERTS holds no *.pem" >&2; exit 2; }
  cp "$REGION_SERVER_CERTS"/*.pem "$out/registration-engine/certs/"
fi
subst() {
  sed -e "s|@REGISTRY_SERVER@|$REGISTRY_SERVER|g" -e "s|@ENGINE_REGISTRY@|$ENGINE_REGISTRY|g" \
      -e "s|@ENGINE_IMAGE@|$ENGINE_IMAGE|g" -e "s|@ENGINE_DIGEST@|$ENGINE_DIGEST|g" \
      -e "s|@OFFER_PUBLISHER_ID@|$OFFER_PUBLISHER_ID|g" -e "s|@OFFER_ID@|$OFFER_ID|g" "$1"
}
subst "$here/values.yaml" > "$out/registration-engine/values.yaml"
subst "$here/manifest.yaml" > "$out/manifest.yaml"
if [[ -n ${VERSION:-} ]]; then
  sed -i -E "s/^version: .*/version: $VERSION/" "$out/manifest.yaml"
fi
cp "$here/mainTemplate.json" "$here/createUiDefinition.json" "$out/"

# Every regionServers entry of the bundle's values needs <entry>.pem.
missing=()
while read -r server; do
  pem="$out/registration-engine/certs/$server.pem"
  grep -q -- '-----BEGIN CERTIFICATE-----' "$pem" 2>/dev/null || missing+=("$server")
done < <(sed -n '/^regionServers:/,/^[^ ]/{s/^  - *//p}' "$here/values.yaml")
if ((${#missing[@]})); then
  rm -rf "$out/registration-engine"
  echo "stage: refusing the bundle: no certificate <server>.pem for region server(s) ${missing[*]}; every run would skip them. Set REGION_SERVER_CERTS to a directory holding them (regionServiceCertsAzure's /usr/lib/regionService/certs; see the chart's certs/README.md)" >&2
  exit 2
fi
echo "stage: bundle directory ready in $out"
