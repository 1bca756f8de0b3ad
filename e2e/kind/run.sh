#!/usr/bin/env bash
# make e2e-kind: everything the kind tier needs, from a fresh clone, then its
# tests.
#
#   e2e/kind/run.sh          host.sh start, bins.sh, scc-operator.sh,
#                            azwi-webhook.sh (per AZWI_VERSIONS),
#                            images.sh, then
#                            go test -tags e2e ./e2e/kind; stops the Docker
#                            daemon it started on the way out
#   e2e/kind/run.sh build    only what the tests need (the same steps up to
#                            images.sh), leaving the Docker daemon running
#                            for the run that follows (make e2e-kind-build,
#                            which .ci/run starts beside the tiers before it)
#   e2e/kind/run.sh clean    remove a cluster kept by E2E_KEEP_CLUSTER=1 and
#                            stop that daemon
#
# E2E_KEEP_CLUSTER=1 keeps the cluster (and so the daemon) for a look
# around; E2E_KEEP_DOCKER=1 keeps only the daemon, whose image cache makes
# the next run warm either way (it lives under the cache directory).
# GOTEST_FLAGS adds flags to go test (e.g. -run). HELM_BIN names the helm the
# chart case installs with (make e2e-kind builds it and sets it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=e2e/kind/lib.sh
source "$here/lib.sh"
cluster=${E2E_CLUSTER_NAME:-registration-engine-e2e}

use_docker() {
  local line
  line=$("$here/host.sh" start)
  case "$line" in
    DOCKER_HOST=) unset DOCKER_HOST ;;
    DOCKER_HOST=*) export DOCKER_HOST=${line#DOCKER_HOST=} ;;
    *) die "host.sh start said: $line" ;;
  esac
}

if [[ "${1:-}" == clean ]]; then
  use_docker
  if "$DOCKER" rm -f -v "$cluster-control-plane" >/dev/null 2>&1; then log "removed cluster $cluster"; else log "no cluster $cluster"; fi
  "$here/host.sh" stop
  exit 0
fi

t0=$(date +%s)
lap() { local now; now=$(date +%s); log "$1 took $((now - t0))s"; t0=$now; }
total=$t0

build=
[[ "${1:-}" == build ]] && build=1
use_docker
if [[ -z $build && "${E2E_KEEP_CLUSTER:-}" != 1 && "${E2E_KEEP_DOCKER:-}" != 1 ]]; then
  trap '"$here/host.sh" stop' EXIT
fi
lap "Docker"
"$here/bins.sh"
lap "programs (bins.sh)"
CACHE_DIR=$CACHE_DIR SCC_OPERATOR_DIR=$SCC_OPERATOR_DIR "$REPO/e2e/scripts/scc-operator.sh" "$SCC_OPERATOR_COMMIT" >&2
lap "rancher/scc-operator (scc-operator.sh)"
for v in $AZWI_VERSIONS; do
  CACHE_DIR=$CACHE_DIR AZWI_VERSION=$v AZWI_DIR=$(azwi_dir "$v") "$REPO/e2e/scripts/azwi-webhook.sh" >/dev/null
done
lap "Azure Workload Identity webhooks $AZWI_VERSIONS (azwi-webhook.sh)"
"$here/images.sh"
lap "images (images.sh)"
if [[ -n $build ]]; then
  log "make e2e-kind-build: done in $(( $(date +%s) - total ))s; the Docker daemon keeps running for make e2e-kind (e2e/kind/host.sh stop stops it)"
  exit 0
fi

export K8S_TESTBIN KIND_NODE_IMAGE=$NODE_IMAGE E2E_IMAGE=$IMAGE E2E_FAKECLOUD_IMAGE=$FAKECLOUD_IMAGE E2E_OPERATOR_IMAGE=$OPERATOR_IMAGE E2E_WEBHOOK_IMAGES=$WEBHOOK_IMAGES E2E_CLUSTER_NAME=$cluster
cd "$REPO"
rc=0
# shellcheck disable=SC2086
go test -tags e2e -count=1 -timeout 30m -v ${GOTEST_FLAGS:-} ./e2e/kind/ || rc=$?
lap "tests (go test -tags e2e ./e2e/kind)"
log "make e2e-kind: exit $rc after $(( $(date +%s) - total ))s in all"
exit $rc
