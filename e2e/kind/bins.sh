#!/usr/bin/env bash
# Builds, from the Go module proxy, every program the kind node and its
# preloaded images need, into $BINDIR (see lib.sh):
#   etcd kube-apiserver kube-controller-manager kubectl   (the k8s testbin's)
#   kubelet kubeadm kube-scheduler kube-proxy             (same recipe)
#   crictl, coredns (the version kubeadm names), pause    (e2e/kind/cmd/pause)
# Idempotent: each group is rebuilt only when its stamp's versions change.
set -euo pipefail
# shellcheck source=e2e/kind/lib.sh
source "$(dirname "$0")/lib.sh"

export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. What the real-control-plane tests already build; copied, never rebuilt
# here, so the two tiers share one build.
K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION "$REPO/e2e/scripts/k8s-testbin.sh" "$K8S_TESTBIN" >&2
for b in etcd kube-apiserver kube-controller-manager kubectl; do
  cmp -s "$K8S_TESTBIN/$b" "$BINDIR/$b" || cp "$K8S_TESTBIN/$b" "$BINDIR/$b"
done

# 2. The node's own Kubernetes programs, by the same scratch-module recipe
# as the testbin (e2e/scripts/k8s-build.sh).
s="k8s=$K8S_VERSION go=$GO_VERSION"
if ! fresh k8s-node "$s" || ! [[ -x "$BINDIR/kubelet" && -x "$BINDIR/kubeadm" && -x "$BINDIR/kube-scheduler" && -x "$BINDIR/kube-proxy" ]]; then
  log "building kubelet, kubeadm, kube-scheduler, kube-proxy v$K8S_VERSION (cold: ~10 min on 2 cores)"
  start=$(date +%s)
  "$REPO/e2e/scripts/k8s-build.sh" "$K8S_VERSION" "$BINDIR" kubelet kubeadm kube-scheduler kube-proxy
  stamp k8s-node "$s"
  log "built the node's Kubernetes programs in $(( $(date +%s) - start ))s"
fi

# 3. crictl, which kind's node ships (the proxy serves only some versions;
# v1.34.0 is one).
s="crictl=$CRICTL_VERSION go=$GO_VERSION"
if ! fresh crictl "$s" || ! [[ -x "$BINDIR/crictl" ]]; then
  log "building crictl v$CRICTL_VERSION"
  GOBIN=$work/gobin go install -trimpath -ldflags '-s -w' "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION"
  mv "$work/gobin/crictl" "$BINDIR/"
  stamp crictl "$s"
fi

# 4. CoreDNS at the version kubeadm deploys: the build `make test` shares
# (e2e/scripts/coredns-bin.sh), copied.
COREDNS_VERSION=$("$BINDIR/kubeadm" config images list --kubernetes-version "v$K8S_VERSION" 2>/dev/null | sed -n 's|.*/coredns:||p')
[[ -n "$COREDNS_VERSION" ]] || die "kubeadm names no coredns image"
coredns=$(CACHE_DIR=$CACHE_DIR COREDNS_VERSION=$COREDNS_VERSION "$REPO/e2e/scripts/coredns-bin.sh")
cmp -s "$coredns" "$BINDIR/coredns" || cp "$coredns" "$BINDIR/coredns"

# 5. The sandbox ("pause") program: ours, from this repository.
s="pause=$(sha256sum "$REPO/e2e/kind/cmd/pause/main.go" | cut -c1-16) go=$GO_VERSION"
if ! fresh pause "$s" || ! [[ -x "$BINDIR/pause" ]]; then
  (cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$BINDIR/pause" ./e2e/kind/cmd/pause)
  stamp pause "$s"
fi
log "programs ready in $BINDIR"
