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
# pin. Each certificate the bundle carries must be listed, with its SHA-256
# fingerprint, in REGION_SERVER_FINGERPRINTS (default
# manifests/marketplace/region-server-fingerprints.txt), and each listed one
# must be there: a certificate the engine pins is a trust decision made in
# review, not whatever *.pem a directory held when the bundle was staged.
# CHART_DIR (default the repository's chart) and VERSION (the bundle's
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
certs="$out/registration-engine/certs"
missing=()
while read -r server; do
  pem="$certs/$server.pem"
  grep -q -- '-----BEGIN CERTIFICATE-----' "$pem" 2>/dev/null || missing+=("$server")
done < <(sed -n '/^regionServers:/,/^[^ ]/{s/^  - *//p}' "$here/values.yaml")
problems=()
if ((${#missing[@]})); then
  problems+=("no certificate <server>.pem for region server(s) ${missing[*]}; every run would skip them. Set REGION_SERVER_CERTS to a directory holding them (regionServiceCertsAzure's /usr/lib/regionService/certs; see the chart's certs/README.md)")
fi

# cert_fingerprints FILE: the SHA-256 of the DER of each certificate in
# FILE, one a line, in lower-case hex (what
# `openssl x509 -in FILE -outform DER | sha256sum` prints for the first);
# "undecodable" for a block whose base64 does not decode.
cert_fingerprints() {
  local b64 fp
  while IFS= read -r b64; do
    if fp=$(printf '%s' "$b64" | base64 -d 2>/dev/null | sha256sum) && [[ -n $b64 ]]; then
      echo "${fp%% *}"
    else
      echo undecodable
    fi
  done < <(awk '/-----BEGIN CERTIFICATE-----/ {c = 1; s = ""; next}
    /-----END CERTIFICATE-----/ {if (c) print s; c = 0; next}
    c {gsub(/[ \t\r]/, ""); s = s $0}' "$1")
}

# The certificates against their fingerprints: each certificate of the
# bundle's certs/ is listed for its file, and each listed one is there.
list=${REGION_SERVER_FINGERPRINTS:-$here/region-server-fingerprints.txt}
list_name=${REGION_SERVER_FINGERPRINTS:-manifests/marketplace/region-server-fingerprints.txt}
declare -A listed=() listed_as=() found=()
unlisted=0 # a problem the list's fix mends
if [[ ! -r $list ]]; then
  problems+=("the fingerprint list $list_name cannot be read (REGION_SERVER_FINGERPRINTS names another)")
  unlisted=1
else
  n=0
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    read -r fp file source <<<"$line"
    if [[ ! $fp =~ ^[0-9a-f]{64}$ || ! $file =~ ^[^/]+\.pem$ || -z $source ]]; then
      unlisted=1
      problems+=("$list_name:$n is not \"<fingerprint: 64 lower-case hex digits>  <file>.pem  <where it comes from>\": $line")
      continue
    fi
    listed["$file $fp"]=$source
    listed_as[$fp]=$file
  done <"$list"
fi
shopt -s nullglob
for pem in "$certs"/*.pem; do
  file=${pem##*/}
  fps=$(cert_fingerprints "$pem")
  if [[ -z $fps ]]; then
    [[ " ${missing[*]} " == *" ${file%.pem} "* ]] || problems+=("$file holds no PEM certificate")
    continue
  fi
  while read -r fp; do
    if [[ $fp == undecodable ]]; then
      problems+=("$file holds a certificate block whose base64 does not decode")
    elif [[ -n ${listed["$file $fp"]+x} ]]; then
      found["$file $fp"]=1
    else
      unlisted=1 other=
      [[ -z ${listed_as[$fp]:-} ]] || other=" (it lists it for ${listed_as[$fp]})"
      problems+=("$file holds a certificate whose SHA-256 fingerprint $fp is not listed for $file in $list_name$other")
    fi
  done <<<"$fps"
done
for key in "${!listed[@]}"; do
  [[ -z ${found[$key]+x} ]] || continue
  file=${key% *} fp=${key##* } unlisted=1
  if [[ -e $certs/$file ]]; then
    problems+=("$file does not hold the certificate $list_name lists for it, SHA-256 fingerprint $fp (${listed[$key]})")
  else
    problems+=("$file is missing: $list_name lists it, SHA-256 fingerprint $fp (${listed[$key]})")
  fi
done
if ((${#problems[@]})); then
  rm -rf "$out/registration-engine"
  {
    echo "stage: refusing the bundle: ${problems[0]}"
    for p in "${problems[@]:1}"; do echo "stage: refusing the bundle: $p"; done
    if ((unlisted)); then
      echo "stage: each certificate the bundle carries must be listed in $list_name, and each listed one must be there. To add one (a new region server, or one SUSE rotated), check where it comes from (regionServiceCertsAzure, its signature checked with rpm -K), print its fingerprint with: openssl x509 -in <file> -outform DER | sha256sum; then add the line \"<fingerprint>  <file>  <where it comes from>\" to $list_name in a reviewed change. Remove from REGION_SERVER_CERTS a certificate that should not be shipped."
    fi
  } >&2
  exit 2
fi
echo "stage: ${#found[@]} region server certificate(s) match their fingerprints in $list_name"
echo "stage: bundle directory ready in $out"
