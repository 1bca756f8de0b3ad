# Sourced by the e2e/kind scripts: the pinned versions, the cache layout and
# a few helpers. Changing a version here rebuilds exactly what depends on it
# (each artifact records the versions it was built from in a stamp file).
# shellcheck shell=bash disable=SC2034 # the scripts that source it use them

K8S_VERSION=${K8S_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
CRICTL_VERSION=${CRICTL_VERSION:-1.37.0}
# kind's base files (entrypoint, containerd config, units) come from the
# sigs.k8s.io/kind module go.mod requires, so the node matches the library
# that creates the cluster.
KIND_VERSION=${KIND_VERSION:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && go list -m -f '{{.Version}}' sigs.k8s.io/kind)}
DEBIAN_SUITE=${DEBIAN_SUITE:-bookworm}
GO_VERSION=$(go env GOVERSION)

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
KIND_CACHE=$CACHE_DIR/kind
K8S_TESTBIN=${K8S_TESTBIN:-$CACHE_DIR/k8s-testbin/v$K8S_VERSION}
BINDIR=$KIND_CACHE/bin/v$K8S_VERSION
STAMPS=$KIND_CACHE/stamps
DOCKER_ROOT=$KIND_CACHE/docker

# Image names. The node image is local/… so nothing ever tries to pull it.
NODE_IMAGE=${NODE_IMAGE:-local/kind-node:v$K8S_VERSION}
DEBIAN_IMAGE=local/debian:$DEBIAN_SUITE
STATIC_IMAGE=local/static:$DEBIAN_SUITE
GO_IMAGE=local/golang:${GO_VERSION#go}
IMAGE=${IMAGE:-registration-engine:latest}
FAKECLOUD_IMAGE=${FAKECLOUD_IMAGE:-registration-engine-fakecloud:latest}
# rancher/scc-operator at the revision the engine needs (add-rmt-support,
# the first that trusts registrationUrlCert; see e2e/sccoperator), from the
# cache of e2e/scripts/scc-operator.sh.
SCC_OPERATOR_COMMIT=${SCC_OPERATOR_COMMIT:-dad26bb7a9102580bc74747e4159e83f528a25b8}
SCC_OPERATOR_DIR=${SCC_OPERATOR_DIR:-$CACHE_DIR/scc-operator}
OPERATOR_IMAGE=${OPERATOR_IMAGE:-local/scc-operator:${SCC_OPERATOR_COMMIT:0:7}}
# Azure Workload Identity's mutating webhook at the releases customers run,
# each from the cache of e2e/scripts/azwi-webhook.sh: 1.5.1, what AKS's
# add-on ships (its projected token under /var/run/secrets/azure/tokens/),
# and 1.6.0, the newest on the Go module proxy (under
# /var/run/secrets/azure/wi/token/). The kind tier's workload-identity case
# installs the first and then swaps the webhook's image to each next one.
AZWI_VERSIONS=${AZWI_VERSIONS:-1.5.1 1.6.0}
# azwi_dir VERSION: where e2e/scripts/azwi-webhook.sh builds VERSION.
azwi_dir() { echo "$CACHE_DIR/azwi-webhook/v$1"; }
# azwi_image VERSION: the image e2e/kind/images.sh packs VERSION into.
azwi_image() { echo "local/azwi-webhook:v$1"; }
WEBHOOK_IMAGES=$(for v in $AZWI_VERSIONS; do azwi_image "$v"; done | paste -sd' ')

# The daemon host.sh starts listens on its own socket under the cache, so it
# never collides with a Docker the machine already runs; when that socket is
# live and the caller named no daemon, every client here talks to it.
OWN_DOCKER_SOCK=$DOCKER_ROOT/docker.sock
if [[ -z "${DOCKER_HOST:-}" && -S "$OWN_DOCKER_SOCK" ]]; then
  export DOCKER_HOST=unix://$OWN_DOCKER_SOCK
fi
DOCKER=${DOCKER:-docker}
# The classic builder: BuildKit would try to resolve FROM images remotely.
export DOCKER_BUILDKIT=0

mkdir -p "$KIND_CACHE" "$BINDIR" "$STAMPS"

log() { printf '%s kind-e2e: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# fresh NAME STAMP: true when $STAMPS/NAME already records STAMP.
fresh() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
# stamp NAME STAMP: record that NAME was built from STAMP.
stamp() { printf '%s\n' "$2" > "$STAMPS/$1"; }

# image_exists NAME: true when the kind daemon has image NAME.
image_exists() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

# APT_DIR is where mirror reads apt's sources; tests point it at fixtures.
APT_DIR=${APT_DIR:-/etc/apt}

# mirror: the Debian mirror apt already uses on this machine: the first "deb"
# source that carries $DEBIAN_SUITE in $APT_DIR/sources.list,
# sources.list.d/*.list (one-line format) or sources.list.d/*.sources
# (deb822; a stanza with Enabled: no is skipped). The project names no mirror
# of its own; when apt has none, mirror says where one belongs and fails.
mirror() {
  local files=() f m=""
  for f in "$APT_DIR/sources.list" "$APT_DIR"/sources.list.d/*.list "$APT_DIR"/sources.list.d/*.sources; do
    [[ -f "$f" ]] && files+=("$f")
  done
  if ((${#files[@]})); then
    m=$(awk -v suite="$DEBIAN_SUITE" '
      function flush() {
        if (!found && types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " suite " ")) {
          split(uris, u, " ")
          if (u[1] != "") { print u[1]; found = 1 }
        }
        types = uris = suites = enabled = ""
      }
      FNR == 1 { if (prev ~ /\.sources$/) flush(); prev = FILENAME }
      /^[ \t]*#/ { next }
      FILENAME ~ /\.sources$/ {
        if ($0 ~ /^[ \t]*$/) { flush(); next }
        if (match($0, /^[A-Za-z-]+:/)) {
          key = tolower(substr($0, 1, RLENGTH - 1)); val = substr($0, RLENGTH + 1)
          gsub(/^[ \t]+|[ \t]+$/, "", val)
          if (key == "types") types = val
          else if (key == "uris") uris = val
          else if (key == "suites") suites = val
          else if (key == "enabled") enabled = tolower(val)
        }
        next
      }
      $1 == "deb" && !found {
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; found = 1 }
      }
      END { if (prev ~ /\.sources$/) flush() }
    ' "${files[@]}")
  fi
  if [[ -z "$m" ]]; then
    log "ERROR: apt has no Debian mirror for $DEBIAN_SUITE: none of $APT_DIR/sources.list, $APT_DIR/sources.list.d/*.list and *.sources names a \"deb\" source with suite $DEBIAN_SUITE. Add the mirror this machine reaches to apt's sources (as apt-get needs it too), or set APT_DIR to a directory that has one."
    return 1
  fi
  echo "$m"
}
