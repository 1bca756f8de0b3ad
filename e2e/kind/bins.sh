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

# 2. The node's own Kubernetes programs, by the testbin's scratch-module
# recipe: k8s.io/kubernetes replaces its staging modules with ./staging paths
# its module zip lacks, so a scratch module requires it and points each
# staging module at the published v0.<minor>.<patch>.
s="k8s=$K8S_VERSION go=$GO_VERSION"
if ! fresh k8s-node "$s" || ! [[ -x "$BINDIR/kubelet" && -x "$BINDIR/kubeadm" && -x "$BINDIR/kube-scheduler" && -x "$BINDIR/kube-proxy" ]]; then
  log "building kubelet, kubeadm, kube-scheduler, kube-proxy v$K8S_VERSION (cold: ~10 min on 2 cores)"
  start=$(date +%s)
  mkdir -p "$work/k8s" && cd "$work/k8s"
  MOD=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module scratch/k8s"
    go mod edit -json "$MOD" | sed -n 's/^\t"Go": "\(.*\)",/go \1/p'
    grep '^godebug' "$MOD" | sort -u || true
    echo "require k8s.io/kubernetes v$K8S_VERSION"
    echo "replace ("
    go mod edit -json "$MOD" | tr -d ' \t\n' | grep -o '"Old":{"Path":"[^"]*"},"New":{"Path":"\./staging/' \
      | sed 's/"Old":{"Path":"\([^"]*\)".*/\t\1 => \1 v0.'"${K8S_VERSION#1.}"'/'
    echo ")"
  } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport (\n' > tools.go
  for c in kubelet kubeadm kube-scheduler kube-proxy; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >> tools.go; done
  printf ')\n' >> tools.go
  go mod tidy >/dev/null
  V=k8s.io/component-base/version
  mkdir -p out
  go build -trimpath -ldflags "-s -w -X $V.gitVersion=v$K8S_VERSION -X $V.gitMajor=1 -X $V.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X $V.gitTreeState=clean" \
    -o out/ k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
  mv out/* "$BINDIR/"
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

# 4. CoreDNS at the version kubeadm deploys, as a plain module dependency
# (coredns's own go.mod is not built here, only its main package).
COREDNS_VERSION=$("$BINDIR/kubeadm" config images list --kubernetes-version "v$K8S_VERSION" 2>/dev/null | sed -n 's|.*/coredns:||p')
[[ -n "$COREDNS_VERSION" ]] || die "kubeadm names no coredns image"
s="coredns=$COREDNS_VERSION go=$GO_VERSION"
if ! fresh coredns "$s" || ! [[ -x "$BINDIR/coredns" ]]; then
  log "building coredns $COREDNS_VERSION"
  mkdir -p "$work/coredns" && cd "$work/coredns"
  printf 'module scratch/coredns\n\ngo 1.24\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/coredns/coredns"\n' > tools.go
  go mod tidy >/dev/null
  go build -trimpath -ldflags '-s -w' -o "$BINDIR/coredns.tmp" github.com/coredns/coredns
  mv "$BINDIR/coredns.tmp" "$BINDIR/coredns"
  stamp coredns "$s"
fi

# 5. The sandbox ("pause") program: ours, from this repository.
s="pause=$(sha256sum "$REPO/e2e/kind/cmd/pause/main.go" | cut -c1-16) go=$GO_VERSION"
if ! fresh pause "$s" || ! [[ -x "$BINDIR/pause" ]]; then
  (cd "$REPO" && go build -trimpath -ldflags '-s -w' -o "$BINDIR/pause" ./e2e/kind/cmd/pause)
  stamp pause "$s"
fi
log "programs ready in $BINDIR"
