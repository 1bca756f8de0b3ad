# Sourced by the e2e/kind scripts: the pinned versions, the cache layout and
# a few helpers. Changing a version here rebuilds exactly what depends on it
# (each artifact records the versions it was built from in a stamp file).
# shellcheck shell=bash disable=SC2034 # the scripts that source it use them

K8S_VERSION=${K8S_VERSION:-1.34.4}
ETCD_VERSION=${ETCD_VERSION:-3.6.5}
CRICTL_VERSION=${CRICTL_VERSION:-1.34.0}
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

# mirror: the Debian mirror apt already uses on this machine.
mirror() {
  local m
  m=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -m1 -E 'debian/?( |$)' | sed -E 's/^URIs: *//; s/^deb (\[[^]]*\] )?//; s/ .*//')
  echo "${m:-http://deb.debian.org/debian}"
}
