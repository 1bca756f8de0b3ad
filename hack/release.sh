#!/usr/bin/env bash
# Builds a release from the one version source, the file VERSION (#.#.#, what
# the Marketplace bundle demands):
#
#   hack/release.sh stamp            writes VERSION into the chart's Chart.yaml
#                                    (version, appVersion), the bundle's
#                                    manifest.yaml (version) and the kustomize
#                                    base's image tag; a test fails while they
#                                    disagree
#   hack/release.sh build OUTDIR     the release in OUTDIR, from stamped copies
#                                    (the tree is not changed):
#     registration-engine-<v>.tgz              helm package of the chart
#     registration-engine-<v>-linux-<arch>     the engine, job.Version=<v>:
#                                    the binary of the image below, copied out
#                                    of it (with RELEASE_IMAGE=0, built here,
#                                    and its SBOM says no image was built)
#     registration-engine-<v>-linux-<arch>.cdx.json   its SBOM (CycloneDX)
#     registration-engine-marketplace-<v>.tar.gz      the staged bundle, when
#                                    ENGINE_DIGEST names the pushed image
#     SHA256SUMS
#   and, unless RELEASE_IMAGE=0, the image IMAGE_REPO:<v>-<arch> per arch
#   with OCI labels (org.opencontainers.image.*), built by make image (the
#   same recipe, build arguments and platform check as a workstation's).
#
# Environment: HELM (helm), CYCLONEDX_GOMOD (cyclonedx-gomod), RELEASE_ARCHS
# (amd64 arm64), IMAGE_REPO (registration-engine), BUILD_IMAGE, BASE_IMAGE and
# BASE_IMAGE_<arch> (the bases, each name@sha256:<digest>; RELEASE_UNPINNED=1
# accepts tags, for a build that is not published), MAKE (make); for the
# bundle REGISTRY_SERVER, ENGINE_IMAGE, ENGINE_DIGEST, OFFER_PUBLISHER_ID, OFFER_ID and REGION_SERVER_CERTS
# (see manifests/marketplace/stage.sh): when this build makes the image,
# ENGINE_DIGEST must be the registry's digest of its amd64 image, as docker
# recorded it when make image-push pushed it. DOCKER (docker) is the docker
# client. VERSION in the environment replaces
# the file's (a test stamps a version of its own). Needs docker for the
# image; the SBOM's release properties are written by hack/sbomprops.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=${VERSION:-$(tr -d '[:space:]' < VERSION)}
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "release: VERSION $version is not #.#.# (the Marketplace bundle's version format)" >&2; exit 2; }
chart=manifests/chart/registration-engine
bundle_manifest=manifests/marketplace/manifest.yaml

# stamp_chart DIR: Chart.yaml's version and appVersion.
stamp_chart() {
  sed -i -E -e "s/^version: .*/version: $version/" -e "s/^appVersion: .*/appVersion: \"$version\"/" "$1/Chart.yaml"
}
stamp_manifest() {
  sed -i -E "s/^version: .*/version: $version/" "$1"
}
# stamp_kustomize FILE: the engine's image tag in the kustomize base.
stamp_kustomize() {
  sed -i -E "s|^( *image: registration-engine):[^ ]*$|\1:$version|" "$1"
}
kustomize_cronjob=manifests/base/cattle-scc-system/cronjob.yaml

case ${1:-} in
stamp)
  stamp_chart "$chart"
  stamp_manifest "$bundle_manifest"
  stamp_kustomize "$kustomize_cronjob"
  echo "release: stamped $version into $chart/Chart.yaml (version, appVersion), $bundle_manifest (version) and $kustomize_cronjob (the image's tag)"
  exit 0
  ;;
build) out=${2:?usage: $0 build OUTDIR} ;;
*) echo "usage: $0 stamp | build OUTDIR" >&2; exit 2 ;;
esac

grep -qE "^## \[?$version\]?" CHANGELOG.md || { echo "release: CHANGELOG.md has no section for $version (## [$version])" >&2; exit 2; }
helm=${HELM:-helm}
cdx=${CYCLONEDX_GOMOD:-cyclonedx-gomod}
archs=${RELEASE_ARCHS:-amd64 arm64}
image=${RELEASE_IMAGE:-1}
docker=${DOCKER:-docker}

# The bases, when this build makes the image: the binary is the image's, so
# BUILD_IMAGE's toolchain compiled it and BASE_IMAGE (BASE_IMAGE_<arch> for
# an architecture) is what it runs on. A tag names whatever was pushed under
# it last, so a published release names each by digest; every unpinned one
# is refused at once, before anything is built.
# By default the Dockerfile's, as make image takes them.
build_image=${BUILD_IMAGE:-$(sed -n 's/^ARG BUILD_IMAGE=//p' Dockerfile)}
base_image=${BASE_IMAGE:-$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)}
# base_of ARCH: the base of ARCH's image, as make image picks it.
base_of() {
  local v=BASE_IMAGE_$1
  echo "${!v:-$base_image}"
}
pinned() { [[ $1 =~ @sha256:[0-9a-f]{64}$ ]]; }
if [[ $image != 0 ]]; then
  unpinned=()
  pinned "$build_image" || unpinned+=("BUILD_IMAGE=$build_image")
  for arch in $archs; do
    base=$(base_of "$arch")
    v=BASE_IMAGE_$arch
    [[ -n ${!v:-} ]] || v=BASE_IMAGE
    pinned "$base" || unpinned+=("$v=$base ($arch)")
  done
  if ((${#unpinned[@]})); then
    if [[ ${RELEASE_UNPINNED:-0} != 1 ]]; then
      {
        echo "release: the image's bases are not pinned by digest:"
        printf '  %s\n' "${unpinned[@]}"
        echo "  name each as <name>@sha256:<digest> (docs/releasing.md says how to read the digest), or set RELEASE_UNPINNED=1 for a build that is not published"
      } >&2
      exit 2
    fi
    echo "release: unpinned bases accepted (RELEASE_UNPINNED=1), not for publishing: ${unpinned[*]}"
  fi
fi

# The bundle's image is linux/amd64; its digest is compared with the amd64
# image this build makes (below), so one must be made.
if [[ -n ${ENGINE_DIGEST:-} && $image != 0 && " $archs " != *" amd64 "* ]]; then
  echo "release: ENGINE_DIGEST names the bundle's linux/amd64 image, but RELEASE_ARCHS=\"$archs\" builds none: add amd64" >&2
  exit 2
fi

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The build time is the commit's, so that two builds of one commit agree:
# the image's label, and every archive's file times.
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
container=
cleanup() {
  [[ -z $container ]] || "$docker" rm -f "$container" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# What an earlier build of this version left in OUTDIR goes first: a bundle
# or an architecture this build does not make must not reach SHA256SUMS.
rm -f -- "$out/registration-engine-$version.tgz" "$out/registration-engine-marketplace-$version.tar.gz" \
  "$out"/registration-engine-"$version"-linux-* "$out/SHA256SUMS"

# reproducible_tgz DIR NAME OUT: DIR's NAME as a .tar.gz that two builds of
# one commit write byte for byte alike (names sorted, the commit's time,
# no owner, gzip without a name or time).
reproducible_tgz() {
  tar -C "$1" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu -cf - "$2" | gzip -n -9 > "$3"
}

# The chart: a stamped copy with the LICENSE, packaged.
cp -R "$chart" "$work/registration-engine"
cp LICENSE "$work/registration-engine/LICENSE"
stamp_chart "$work/registration-engine"
# helm package stamps every file with the time it runs: repacked.
"$helm" package "$work/registration-engine" --destination "$work/package" >/dev/null
mkdir "$work/unpacked"
tar -C "$work/unpacked" -xzf "$work/package/registration-engine-$version.tgz"
reproducible_tgz "$work/unpacked" registration-engine "$out/registration-engine-$version.tgz"
echo "release: chart $(cd "$out" && ls registration-engine-"$version".tgz) (version $version, appVersion $version)"

# The images, per architecture, by make image (as IMAGE-<arch>, so that
# make image-push IMAGE=<repo>:<v> pushes them and their list), which also
# checks each image's platform. FAKECLOUD_IMAGE= : the fake cloud is not
# released.
repo=${IMAGE_REPO:-registration-engine}
if [[ $image != 0 ]]; then
  base_args=()
  for arch in $archs; do base_args+=("BASE_IMAGE_$arch=$(base_of "$arch")"); done
  "${MAKE:-make}" --no-print-directory image IMAGE="$repo:$version" FAKECLOUD_IMAGE= IMAGE_ARCHS="$archs" \
    VERSION="$version" REVISION="$revision" CREATED="$created" \
    BUILD_IMAGE="$build_image" BASE_IMAGE="$base_image" "${base_args[@]}"
  for arch in $archs; do
    tag="$repo:$version-$arch"
    echo "release: image $tag $("$docker" image inspect -f '{{.Os}}/{{.Architecture}}' "$tag")"
    "$docker" image inspect -f '{{range $k, $v := .Config.Labels}}  {{$k}}={{$v}}{{println}}{{end}}' "$tag"
  done
else
  echo "release: image skipped (RELEASE_IMAGE=0): the binaries are built here, not taken from an image"
fi

# The bundle pins the engine by ENGINE_DIGEST, a digest only the registry
# gives (make image-push). It must be that of the amd64 image this build
# made (the Marketplace takes linux/amd64 only): another digest ships an
# image this release did not build, whose binary, SBOM and bases are not the
# ones released beside it. docker records the registry's digest among the
# image's RepoDigests when it pushes it; a build that made a new image (no
# build cache) has none until it is pushed.
if [[ -n ${ENGINE_DIGEST:-} && $image != 0 ]]; then
  tag="$repo:$version-amd64"
  # The image's ID, then the registry digests it was pushed (or pulled) as.
  mapfile -t inspected < <("$docker" image inspect -f '{{.Id}}{{println}}{{range .RepoDigests}}{{println .}}{{end}}' "$tag")
  ((${#inspected[@]})) || { echo "release: docker image inspect $tag said nothing" >&2; exit 1; }
  id=${inspected[0]} pushed= repo_digests=()
  for d in "${inspected[@]:1}"; do
    [[ -n $d ]] || continue
    repo_digests+=("$d")
    [[ ${d##*@} == "$ENGINE_DIGEST" ]] && pushed=$d
  done
  if [[ -z $pushed ]]; then
    {
      if ((${#repo_digests[@]} == 0)); then
        echo "release: ENGINE_DIGEST=$ENGINE_DIGEST is not the digest of the image this build made, $tag (image ID $id): that image has no registry digest (it was not pushed, or this build made a new one)"
      else
        echo "release: ENGINE_DIGEST=$ENGINE_DIGEST is not the digest of the image this build made, $tag (image ID $id), which was pushed as:"
        printf '  %s\n' "${repo_digests[@]}"
      fi
      echo "  push this build's images (make image-push IMAGE=$repo:$version) and run again with ENGINE_DIGEST set to the digest it printed for $tag (docker image inspect -f '{{join .RepoDigests \" \"}}' $tag lists it)"
    } >&2
    exit 2
  fi
  echo "release: ENGINE_DIGEST=$ENGINE_DIGEST is the digest of $tag ($pushed)"
elif [[ -n ${ENGINE_DIGEST:-} ]]; then
  echo "release: ENGINE_DIGEST=$ENGINE_DIGEST not compared with an image: RELEASE_IMAGE=0 built none"
fi

# The binaries and their SBOMs. With the image, the binary is the one the
# image carries, copied out of it: what runs in the cluster is what is
# released and what the SBOM describes. Without it, built here with the
# Dockerfile's flags, and the SBOM says that no image was built.
for arch in $archs; do
  bin="$out/registration-engine-$version-linux-$arch"
  if [[ $image != 0 ]]; then
    tag="$repo:$version-$arch"
    container=$("$docker" create --platform "linux/$arch" "$tag")
    "$docker" cp "$container:/registration-engine" "$bin"
    "$docker" rm "$container" >/dev/null
    container=
    props=(
      "registration-engine:release:binary" "copied from the image $tag (/registration-engine)"
      "registration-engine:release:build-image" "$build_image"
      "registration-engine:release:base-image" "$(base_of "$arch")"
    )
  else
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath \
      -ldflags "-s -w -X github.com/rancher/registration-engine/job.Version=$version" -o "$bin" .
    props=("registration-engine:release:binary" "built on the release machine with RELEASE_IMAGE=0: no image was built")
  fi
  # The binary is for the architecture it is named for: a build that got
  # no TARGETARCH compiles amd64, whatever platform its image says.
  goarch=$(go version -m "$bin" | awk '$1 == "build" && $2 ~ /^GOARCH=/ {sub(/^GOARCH=/, "", $2); print $2}')
  [[ $goarch == "$arch" ]] || { echo "release: $(basename "$bin") is a GOARCH=$goarch binary, not $arch" >&2; exit 1; }
  # -std: the Go standard library is compiled in too; no serial number or
  # timestamp, so that two builds of one commit give the same SBOM. The
  # release's properties say where the binary comes from.
  "$cdx" bin -json -std -noserial -notimestamp -version "v$version" -output "$work/sbom.json" "$bin"
  # The tools that made the release's files, so that "two builds agree"
  # can be checked for the same tools: Go (the binary), helm (the chart
  # package), cyclonedx-gomod (this SBOM).
  props+=(
    "registration-engine:release:go" "$(go env GOVERSION)"
    "registration-engine:release:helm" "$("$helm" version --short 2>/dev/null || echo unknown)"
    "registration-engine:release:cyclonedx-gomod" "$("$cdx" version 2>/dev/null | awk '$1 == "Version:" {print $2}')"
  )
  go run ./hack/sbomprops "${props[@]}" < "$work/sbom.json" > "$bin.cdx.json"
  echo "release: binary $(basename "$bin") ($(sha256sum < "$bin" | cut -c1-12)…, ${props[1]}) and its SBOM $(basename "$bin").cdx.json"
done

# The Marketplace bundle, once the image is pushed and its digest known.
if [[ -n ${ENGINE_DIGEST:-} ]]; then
  CHART_DIR="$work/registration-engine" VERSION=$version manifests/marketplace/stage.sh "$work/bundle" >/dev/null
  reproducible_tgz "$work/bundle" . "$out/registration-engine-marketplace-$version.tar.gz"
  echo "release: bundle registration-engine-marketplace-$version.tar.gz (manifest.yaml version $version, image $ENGINE_IMAGE@$ENGINE_DIGEST)"
else
  echo "release: bundle skipped: push the image, then run again with REGISTRY_SERVER, ENGINE_IMAGE, ENGINE_DIGEST, OFFER_PUBLISHER_ID, OFFER_ID and REGION_SERVER_CERTS (manifests/marketplace/stage.sh)"
fi

(
  cd "$out"
  files=()
  for f in registration-engine-"$version".tgz registration-engine-marketplace-"$version".tar.gz registration-engine-"$version"-linux-*; do
    [[ -e $f ]] && files+=("$f")
  done
  sha256sum -- "${files[@]}" > SHA256SUMS
)
echo "release: SHA256SUMS"
echo "release: $version in $out"
