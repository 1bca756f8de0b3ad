#!/usr/bin/env bash
# Builds, from the Go module proxy, every program the kind node and its
# preloaded images need, into $BINDIR (see lib.sh):
#   etcd kube-apiserver kube-controller-manager kubectl   (the k8s testbin's)
#   kubelet kubeadm kube-scheduler kube-proxy             (same recipe)
#   crictl, coredns (the version kubeadm names), pause    (e2e/kind/cmd/pause)
# Idempotent: each group is rebuilt only when its stamp's versions change.
#
#   e2e/kind/bins.sh        build what is missing or stale
#   e2e/kind/bins.sh plan   say of each group "current NAME" or "stale NAME",
#                           building nothing (works from an empty cache)
set -euo pipefail
# shellcheck source=e2e/kind/lib.sh
source "$(dirname "$0")/lib.sh"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
mode=${1:-build}
[[ $mode == build || $mode == plan ]] || die "unknown mode $mode (build, plan)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# group NAME: NAME_current says whether group NAME is up to date. In plan
# mode, say so and return 1 (skip the build); in build mode, return 0 when
# NAME must be built.
group() {
  local check=${1//-/_}_current
  if [[ $mode == plan ]]; then
    if "$check"; then echo "current $1"; else echo "stale $1"; fi
    return 1
  fi
  ! "$check"
}
# same A B: the two files exist and are byte for byte the same.
same() { [[ -f "$1" && -f "$2" ]] && cmp -s "$1" "$2"; }

# 1. What the real-control-plane tests already build; copied, never rebuilt
# here, so the two tiers share one build. Current when the testbin script
# finds its own build current and the copies are that build.
testbin=(etcd kube-apiserver kube-controller-manager kubectl)
testbin_current() {
  local b built
  built=$(CACHE_DIR=$CACHE_DIR K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION "$REPO/e2e/scripts/k8s-testbin.sh" plan "$K8S_TESTBIN" 2>/dev/null) || return 1
  [[ $built == current* ]] || return 1
  for b in "${testbin[@]}"; do same "$K8S_TESTBIN/$b" "$BINDIR/$b" || return 1; done
}
if group testbin; then
  CACHE_DIR=$CACHE_DIR K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION "$REPO/e2e/scripts/k8s-testbin.sh" "$K8S_TESTBIN" >&2
  for b in "${testbin[@]}"; do
    cmp -s "$K8S_TESTBIN/$b" "$BINDIR/$b" || cp "$K8S_TESTBIN/$b" "$BINDIR/$b"
  done
fi

# 2. The node's own Kubernetes programs, by the same scratch-module recipe
# as the testbin (e2e/scripts/k8s-build.sh).
s_node="k8s=$K8S_VERSION go=$GO_VERSION"
k8s_node_current() { fresh k8s-node "$s_node" && [[ -x "$BINDIR/kubelet" && -x "$BINDIR/kubeadm" && -x "$BINDIR/kube-scheduler" && -x "$BINDIR/kube-proxy" ]]; }
if group k8s-node; then
  log "building kubelet, kubeadm, kube-scheduler, kube-proxy v$K8S_VERSION (cold: ~10 min on 2 cores)"
  start=$(date +%s)
  "$REPO/e2e/scripts/k8s-build.sh" "$K8S_VERSION" "$BINDIR" kubelet kubeadm kube-scheduler kube-proxy
  stamp k8s-node "$s_node"
  log "built the node's Kubernetes programs in $(( $(date +%s) - start ))s"
fi

# 3. crictl, which kind's node ships (the proxy serves only some versions;
# v1.37.0 is one; v1.35.0 is not).
s_crictl="crictl=$CRICTL_VERSION go=$GO_VERSION"
crictl_current() { fresh crictl "$s_crictl" && [[ -x "$BINDIR/crictl" ]]; }
if group crictl; then
  log "building crictl v$CRICTL_VERSION"
  GOBIN=$work/gobin go install -trimpath -ldflags '-s -w' "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION"
  mv "$work/gobin/crictl" "$BINDIR/"
  stamp crictl "$s_crictl"
fi

# 4. CoreDNS at the version kubeadm deploys: the build `make test` shares
# (e2e/scripts/coredns-bin.sh), copied. Its freshness is that script's own
# stamp plus the copy being the same file.
coredns_version() {
  [[ -x "$BINDIR/kubeadm" ]] || return 1
  "$BINDIR/kubeadm" config images list --kubernetes-version "v$K8S_VERSION" 2>/dev/null | sed -n 's|.*/coredns:||p'
}
coredns_current() {
  local v built
  v=$(coredns_version) && [[ -n $v ]] || return 1
  built=$(CACHE_DIR=$CACHE_DIR COREDNS_VERSION=$v "$REPO/e2e/scripts/coredns-bin.sh" plan) || return 1
  [[ $built == current* ]] && same "${built#current }" "$BINDIR/coredns"
}
if group coredns; then
  COREDNS_VERSION=$(coredns_version) || true
  [[ -n "$COREDNS_VERSION" ]] || die "kubeadm names no coredns image"
  coredns=$(CACHE_DIR=$CACHE_DIR COREDNS_VERSION=$COREDNS_VERSION "$REPO/e2e/scripts/coredns-bin.sh")
  cmp -s "$coredns" "$BINDIR/coredns" || cp "$coredns" "$BINDIR/coredns"
fi

# 5. The sandbox ("pause") program: ours, from this repository.
s_pause="pause=$(sha256sum "$REPO/e2e/kind/cmd/pause/main.go" | cut -c1-16) go=$GO_VERSION"
pause_current() { fresh pause "$s_pause" && [[ -x "$BINDIR/pause" ]]; }
if group pause; then
  (cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$BINDIR/pause" ./e2e/kind/cmd/pause)
  stamp pause "$s_pause"
fi
[[ $mode == plan ]] || log "programs ready in $BINDIR"
