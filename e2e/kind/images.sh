#!/usr/bin/env bash
# Builds every image the kind tier needs, from Debian's packages, the Go
# module proxy and this repository, with no registry pull:
#
#   local/debian:<suite>     debootstrap minbase + CA bundle + iptables
#   local/static:<suite>     CA bundle, /etc/passwd with 65532, nothing else
#   local/golang:<go>        local/debian + this machine's Go toolchain
#   registration-engine:latest, registration-engine-fakecloud:latest
#                            the project's Dockerfile with the three above
#                            as BUILD_IMAGE and BASE_IMAGE
#   local/scc-operator:<commit>
#                            rancher/scc-operator's static binary, as
#                            e2e/scripts/scc-operator.sh built it, on
#                            local/static
#   local/azwi-webhook:v<version>
#                            Azure Workload Identity's webhook, as
#                            e2e/scripts/azwi-webhook.sh built it, on
#                            local/static; one per version of
#                            AZWI_VERSIONS (lib.sh)
#   local/kind-node:v<k8s>   a kind node assembled by hand (see node_image)
#
# Run e2e/kind/host.sh start first (it sets up Docker), bins.sh (the
# programs), e2e/scripts/scc-operator.sh $SCC_OPERATOR_COMMIT and
# e2e/scripts/azwi-webhook.sh (each of AZWI_VERSIONS). Idempotent: the base and node images are rebuilt only when the
# versions, programs or this script recorded in their stamps change; the
# engine images go through Docker's build cache every time.
set -euo pipefail
# shellcheck source=e2e/kind/lib.sh
source "$(dirname "$0")/lib.sh"

# recipe FUNCTION: a hash of FUNCTION's own text, so editing one recipe
# rebuilds its image and what depends on it, not everything.
recipe() { declare -f "$1" | sha256sum | cut -c1-16; }
# image_id NAME…: the daemon's ids of the images, "none" for one it lacks,
# so a stamp can always be computed, even from an empty cache.
image_id() {
  local i
  for i; do "$DOCKER" image inspect -f '{{.Id}}' "$i" 2>/dev/null || echo none; done
}
# The programs the node image packs, from $BINDIR (bins.sh). The node's
# stamp hashes these files themselves, so it follows whatever built them
# and reads no other script's stamps.
NODE_PROGRAMS=(etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl crictl coredns pause)
# up_to_date NAME STAMP IMAGE…: $STAMPS/NAME records STAMP and the daemon
# has every IMAGE.
up_to_date() {
  local name=$1 s=$2 i
  shift 2
  fresh "$name" "$s" || return 1
  for i; do image_exists "$i" || return 1; done
}
# packed: one line per program, its hash or "missing".
packed() {
  local p
  for p in "${NODE_PROGRAMS[@]}"; do
    if [[ -f "$BINDIR/$p" ]]; then printf '%s %s\n' "$p" "$(sha256sum < "$BINDIR/$p" | cut -c1-16)"; else printf '%s missing\n' "$p"; fi
  done
}
work=$(mktemp -d "$KIND_CACHE/work.XXXXXX")
stage=
cleanup() {
  [[ -n "$stage" ]] && "$DOCKER" rm -f -v "$stage" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# debootstrap_to DIR PACKAGES: a minbase Debian of $DEBIAN_SUITE with
# PACKAGES, without apt's caches and lists.
debootstrap_to() {
  local dir=$1 pkgs=$2 start from
  start=$(date +%s)
  from=$(mirror) || exit 1
  log "debootstrap $DEBIAN_SUITE into $dir (+$pkgs) from $from"
  debootstrap --variant=minbase --include="$pkgs" "$DEBIAN_SUITE" "$dir" "$from" > "$dir.log" 2>&1 \
    || { tail -20 "$dir.log" >&2; die "debootstrap failed (log: $dir.log)"; }
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
  log "debootstrap done in $(( $(date +%s) - start ))s"
}

# ------------------------------------------------------------ base images
base_images_stamp() { echo "suite=$DEBIAN_SUITE recipe=$(recipe base_images)$(recipe debootstrap_to)"; }
base_images() {
  local s
  s=$(base_images_stamp)
  up_to_date base-images "$s" "$DEBIAN_IMAGE" "$STATIC_IMAGE" && return
  local root=$work/debian
  debootstrap_to "$root" ca-certificates,iptables,conntrack
  tar -C "$root" -c . | "$DOCKER" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$DEBIAN_IMAGE" >/dev/null

  # The static base: what distroless/static gives the engine (a CA bundle,
  # a passwd entry for 65532 "nonroot", /tmp) and no shell.
  local st=$work/static
  mkdir -p "$st/etc/ssl/certs" "$st/tmp" "$st/home/nonroot"
  cp "$root/etc/ssl/certs/ca-certificates.crt" "$st/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$st/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > "$st/etc/group"
  printf 'hosts: files dns\n' > "$st/etc/nsswitch.conf"
  chmod 1777 "$st/tmp"
  chown 65532:65532 "$st/home/nonroot"
  tar -C "$st" -c . | "$DOCKER" import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' - "$STATIC_IMAGE" >/dev/null
  rm -rf "$root" "$st"
  stamp base-images "$s"
  log "built $DEBIAN_IMAGE and $STATIC_IMAGE"
}

# The Go build image: the project's Dockerfile runs `go mod download` and
# `go build` in it, with a shell, so Debian plus this machine's toolchain.
# It trusts this machine's CA bundle, not Debian's: where egress goes
# through a TLS-inspecting proxy, `go mod download` otherwise fails with
#   x509: certificate signed by unknown authority
# (only the build stage sees it; no image we ship carries it).
GO_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
go_image_stamp() { echo "go=$GO_VERSION base=$(image_id "$DEBIAN_IMAGE") ca=$(sha256sum < "$GO_CA_BUNDLE" | cut -c1-16) recipe=$(recipe go_image)"; }
go_image() {
  local bundle=$GO_CA_BUNDLE s
  s=$(go_image_stamp)
  up_to_date go-image "$s" "$GO_IMAGE" && return
  log "building $GO_IMAGE from $(go env GOROOT)"
  local ctx=$work/goctx
  mkdir -p "$ctx"
  cp -a "$(go env GOROOT)" "$ctx/go"
  cp "$bundle" "$ctx/ca-certificates.crt"
  printf 'FROM %s\nCOPY go /usr/local/go\nCOPY ca-certificates.crt /etc/ssl/certs/\nENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local\n' \
    "$DEBIAN_IMAGE" > "$ctx/Dockerfile"
  "$DOCKER" build -q -t "$GO_IMAGE" "$ctx" >/dev/null
  rm -rf "$ctx"
  stamp go-image "$s"
}

# ---------------------------------------------------------- engine images
# The project's Dockerfile, unchanged, with the local bases. The context is
# the files git would commit (tracked and untracked-but-not-ignored), so
# bin/ and .git do not reach the builder and an unchanged tree hits the
# build cache.
engine_images() {
  local version ctx=$work/context.tar
  version=$(cd "$REPO" && git describe --tags --always --dirty 2>/dev/null || echo dev)
  # (tracked files deleted in the work tree are left out)
  # shellcheck disable=SC2016
  (cd "$REPO" && git ls-files -z -co --exclude-standard | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
    | tar --null -T - -c -f "$ctx")
  local args=(--build-arg "BUILD_IMAGE=$GO_IMAGE" --build-arg "BASE_IMAGE=$STATIC_IMAGE" --build-arg "VERSION=$version")
  log "building $IMAGE and $FAKECLOUD_IMAGE (version $version)"
  # The build stage gets a tag of its own: the previous one then becomes
  # dangling and is pruned, instead of 1 GB per source change piling up.
  "$DOCKER" build -q "${args[@]}" --target build -t "$IMAGE-build" - < "$ctx" >/dev/null
  "$DOCKER" build -q "${args[@]}" -t "$IMAGE" - < "$ctx" >/dev/null
  "$DOCKER" build -q "${args[@]}" --target fakecloud -t "$FAKECLOUD_IMAGE" - < "$ctx" >/dev/null
  "$DOCKER" image prune -f >/dev/null
}

# ---------------------------------------- operator and webhook images
# A static binary as the kind tier runs it, on the engine's base, as user
# 65532: rancher/scc-operator (the binary the real-control-plane tests run)
# and Azure Workload Identity's mutating webhook (/manager, as its release
# image runs it). Each is rebuilt only when its binary, the base or this
# recipe changes.
OPERATOR_BIN=$SCC_OPERATOR_DIR/$SCC_OPERATOR_COMMIT/operator
# static_image_stamp BIN: the stamp of an image of BIN.
static_image_stamp() {
  local h=missing
  [[ -f "$1" ]] && h=$(sha256sum < "$1" | cut -c1-16)
  echo "bin=$h base=$(image_id "$STATIC_IMAGE") recipe=$(recipe static_image)"
}
# static_image NAME BIN PATH IMAGE BUILDER: IMAGE with BIN at PATH, stamped
# NAME-image; BUILDER is what builds BIN, for the error when it is missing.
static_image() {
  local name=$1 bin=$2 path=$3 image=$4 builder=$5 s
  [[ -x "$bin" ]] || die "no $name binary at $bin ($builder builds it)"
  s=$(static_image_stamp "$bin")
  up_to_date "$name-image" "$s" "$image" && return
  local ctx=$work/$name-ctx
  mkdir -p "$ctx"
  cp "$bin" "$ctx/binary"
  printf 'FROM %s\nCOPY binary %s\nUSER 65532:65532\nENTRYPOINT ["%s"]\n' "$STATIC_IMAGE" "$path" "$path" > "$ctx/Dockerfile"
  "$DOCKER" build -q -t "$image" "$ctx" >/dev/null
  rm -rf "$ctx"
  stamp "$name-image" "$s"
  log "built $image from $bin"
}
operator_image() { static_image operator "$OPERATOR_BIN" /usr/bin/scc-operator "$OPERATOR_IMAGE" "e2e/scripts/scc-operator.sh $SCC_OPERATOR_COMMIT"; }
# webhook_images: one image per webhook release, stamped webhook-v<version>-image.
webhook_images() {
  local v
  for v in $AZWI_VERSIONS; do
    static_image "webhook-v$v" "$(azwi_dir "$v")/manager" /manager "$(azwi_image "$v")" "AZWI_VERSION=$v e2e/scripts/azwi-webhook.sh"
  done
}

# ------------------------------------------------------------- node image
# What kind build node-image would produce, assembled without a pull:
#   - Debian with systemd, containerd, runc, CNI plugins and kind's base
#     package list; kind's base files (entrypoint, containerd config,
#     units) from the sigs.k8s.io/kind module go.mod requires;
#   - restrict_oom_score_adj = true (CRI sandboxes otherwise need
#     CAP_SYS_RESOURCE to lower their oom_score_adj);
#   - crictl, kubelet/kubeadm/kubectl in /usr/bin, /kind/version;
#   - every image `kubeadm config images list` names, built here from the
#     programs of bins.sh and preloaded in containerd's k8s.io namespace;
#   - a static ptp/host-local CNI config instead of kindnetd (one node needs
#     no overlay); /kind/manifests/default-cni.yaml only records it.
# node_image_stamp [PACKED]: the node's stamp: the versions, the hash of
# every program it packs (PACKED, packed's output, when already read), its
# recipe, and the bases its control-plane images are built on.
node_image_stamp() {
  local p=${1:-$(packed)}
  echo "k8s=$K8S_VERSION etcd=$ETCD_VERSION kind=$KIND_VERSION suite=$DEBIAN_SUITE" \
    "programs=$(sha256sum <<< "$p" | cut -c1-16) recipe=$(recipe node_image)$(recipe debootstrap_to)" \
    "bases=$(image_id "$DEBIAN_IMAGE" "$STATIC_IMAGE" | sha256sum | cut -c1-16)"
}
node_image() {
  # The programs are hashed once (about 700 MB): for the stamp and for
  # the list of those missing.
  local kind_dir s p missing
  p=$(packed)
  s=$(node_image_stamp "$p")
  if up_to_date node-image "$s" "$NODE_IMAGE"; then
    log "node image $NODE_IMAGE is up to date"
    return
  fi
  missing=$(sed -n 's/ missing$//p' <<< "$p" | tr '\n' ' ')
  [[ -z "$missing" ]] || die "the node packs programs bins.sh has not built into $BINDIR: $missing(run e2e/kind/bins.sh)"
  kind_dir=$(cd "$REPO" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)

  # 1. Control-plane images, named exactly as kubeadm will ask for them.
  local images=() img name pause_image
  mapfile -t images < <("$BINDIR/kubeadm" config images list --kubernetes-version "v$K8S_VERSION" 2>/dev/null)
  ((${#images[@]} >= 7)) || die "kubeadm config images list gave: ${images[*]}"
  pause_image=$(sed -n 's/^ *sandbox_image *= *"\(.*\)"/\1/p' "$kind_dir/images/base/files/etc/containerd/config.toml")
  local ctx=$work/imgctx
  for img in "${images[@]}" "$pause_image"; do
    name=${img##*/}; name=${name%%:*}
    rm -rf "$ctx" && mkdir -p "$ctx"
    case "$name" in
      kube-apiserver|kube-controller-manager|kube-scheduler|etcd)
        cp "$BINDIR/$name" "$ctx/"
        printf 'FROM %s\nCOPY %s /usr/local/bin/%s\n' "$STATIC_IMAGE" "$name" "$name" > "$ctx/Dockerfile" ;;
      kube-proxy) # runs iptables, so Debian's iptables rather than the static base
        cp "$BINDIR/$name" "$ctx/"
        printf 'FROM %s\nCOPY %s /usr/local/bin/%s\n' "$DEBIAN_IMAGE" "$name" "$name" > "$ctx/Dockerfile" ;;
      coredns)
        cp "$BINDIR/coredns" "$ctx/"
        printf 'FROM %s\nCOPY coredns /coredns\nENTRYPOINT ["/coredns"]\n' "$STATIC_IMAGE" > "$ctx/Dockerfile" ;;
      pause)
        cp "$BINDIR/pause" "$ctx/"
        printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$ctx/Dockerfile" ;;
      *) die "no recipe for image $img" ;;
    esac
    "$DOCKER" build -q -t "$img" "$ctx" >/dev/null
  done
  log "built ${images[*]} $pause_image"

  # 2. The root filesystem.
  local root=$work/node
  debootstrap_to "$root" systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,socat
  local f=$kind_dir/images/base/files
  install -m 0755 "$f"/usr/local/bin/* "$root/usr/local/bin/"
  mkdir -p "$root/kind/bin" "$root/etc/systemd/system/kubelet.service.d" "$root/etc/containerd"
  install -m 0644 "$f/kind/README.txt" "$root/kind/"
  install -m 0755 "$f"/kind/bin/* "$root/kind/bin/"
  install -m 0644 "$f/etc/crictl.yaml" "$root/etc/"
  install -m 0644 "$f"/etc/containerd/* "$root/etc/containerd/"
  install -m 0644 -D "$f/etc/default/kubelet" "$root/etc/default/kubelet"
  install -m 0644 "$f"/etc/sysctl.d/* "$root/etc/sysctl.d/"
  install -m 0644 "$f"/etc/systemd/system/*.service "$f"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
  install -m 0644 "$f"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
  # As kind's base image: prune the units a container must not run.
  find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
    "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
    "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> "$root/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$root/sbin/init"
  chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  mkdir -p "$root/etc/kubernetes/manifests"
  # kind's units and hooks expect its own builds under /usr/local.
  mkdir -p "$root/usr/local/sbin" "$root/opt/cni/bin"
  for b in containerd ctr containerd-shim-runc-v2; do ln -sf "/usr/bin/$b" "$root/usr/local/bin/$b"; done
  ln -sf /usr/sbin/runc "$root/usr/local/sbin/runc"
  for p in host-local loopback ptp portmap bridge; do ln -sf "/usr/lib/cni/$p" "$root/opt/cni/bin/$p"; done
  chroot "$root" ctr oci spec \
    | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
    | jq 'del(.process.rlimits)' > "$root/etc/containerd/cri-base.json"
  # Nobody may lower an oom_score_adj where CAP_SYS_RESOURCE is withheld;
  # CRI then keeps the sandboxes' at the runtime's own value.
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$root/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$root/etc/containerd/config.toml" || die "kind's containerd config has no restrict_oom_score_adj"
  install -m 0755 "$BINDIR/crictl" "$root/usr/local/bin/"
  install -m 0755 "$BINDIR/kubelet" "$BINDIR/kubeadm" "$BINDIR/kubectl" "$root/usr/bin/"
  printf 'v%s' "$K8S_VERSION" > "$root/kind/version"
  mkdir -p "$root/etc/cni/net.d" "$root/kind/manifests"
  local conflist='{
  "cniVersion": "0.4.0",
  "name": "kind-e2e",
  "plugins": [
    {"type": "ptp", "ipMasq": true, "mtu": 1500,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}'
  printf '%s\n' "$conflist" > "$root/etc/cni/net.d/10-kind-e2e.conflist"
  {
    echo "# This node has a static CNI config, /etc/cni/net.d/10-kind-e2e.conflist:"
    echo "# ptp + host-local on 10.244.0.0/24 (the pod CIDR kubeadm gives a single"
    echo "# node of kind's default podSubnet). kind applies this file; it records it."
    echo "apiVersion: v1"
    echo "kind: ConfigMap"
    echo "metadata: {name: kind-e2e-cni, namespace: kube-system}"
    echo "data:"
    echo "  10-kind-e2e.conflist: |"
    printf '%s\n' "$conflist" | sed 's/^/    /'
  } > "$root/kind/manifests/default-cni.yaml"
  tar -C "$root" -c . | "$DOCKER" import --change 'ENV container=docker' - "$NODE_IMAGE-stage" >/dev/null
  rm -rf "$root"

  # 3. Preload: start containerd in the stage image and import the images
  # unpacked lazily (as kind does: --no-unpack, pinned), then commit.
  "$DOCKER" save "${images[@]}" "$pause_image" -o "$work/images.tar"
  stage=kind-e2e-node-stage-$$
  "$DOCKER" run -d --name "$stage" --privileged --entrypoint sleep -v "$work/images.tar:/images.tar:ro" \
    "$NODE_IMAGE-stage" infinity >/dev/null
  # shellcheck disable=SC2016 # expanded in the stage container
  "$DOCKER" exec "$stage" bash -c 'nohup containerd > /tmp/containerd.log 2>&1 &
    for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && break; sleep 0.2; done
    ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /images.tar >/dev/null
    ctr -n k8s.io images list -q
    kill $(pidof containerd); for i in $(seq 1 50); do pidof containerd >/dev/null || break; sleep 0.2; done
    rm -rf /tmp/* /run/containerd' > "$work/preloaded"
  for img in "${images[@]}" "$pause_image"; do
    grep -qxF "$img" "$work/preloaded" || die "image $img not preloaded (have: $(tr '\n' ' ' < "$work/preloaded"))"
  done
  # kubeadm's pause name and containerd's sandbox_image may differ; keep both.
  "$DOCKER" commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "$stage" "$NODE_IMAGE-preloaded" >/dev/null
  "$DOCKER" rm -f -v "$stage" >/dev/null; stage=
  # docker commit and import cannot set STOPSIGNAL; a one-line build can.
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$NODE_IMAGE-preloaded" | "$DOCKER" build -q -t "$NODE_IMAGE" - >/dev/null
  "$DOCKER" rmi "$NODE_IMAGE-preloaded" "$NODE_IMAGE-stage" >/dev/null
  stamp node-image "$s"
  log "built $NODE_IMAGE ($("$DOCKER" image inspect -f '{{.Size}}' "$NODE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
}

# stamps: each image's name in $STAMPS, the stamp it must record to be
# current, and the images that must exist; one line each, tab-separated.
# The builds above and plan below decide by the same lines.
stamps() {
  printf 'base-images\t%s\t%s\n' "$(base_images_stamp)" "$DEBIAN_IMAGE $STATIC_IMAGE"
  printf 'go-image\t%s\t%s\n' "$(go_image_stamp)" "$GO_IMAGE"
  printf 'operator-image\t%s\t%s\n' "$(static_image_stamp "$OPERATOR_BIN")" "$OPERATOR_IMAGE"
  local v
  for v in $AZWI_VERSIONS; do
    printf 'webhook-v%s-image\t%s\t%s\n' "$v" "$(static_image_stamp "$(azwi_dir "$v")/manager")" "$(azwi_image "$v")"
  done
  printf 'node-image\t%s\t%s\n' "$(node_image_stamp)" "$NODE_IMAGE"
}
# plan: whether each image is current or would be built, without building
# or pulling anything; works from an empty cache and with no daemon.
plan() {
  local name s images
  while IFS=$'\t' read -r name s images; do
    # shellcheck disable=SC2086 # images is a space-separated list
    if up_to_date "$name" "$s" $images; then echo "current $name"; else echo "stale $name"; fi
  done < <(stamps)
}

# images.sh [base|engine|operator|webhook|node|plan|stamps]…: only those steps (default: all of them).
for step in "${@:-all}"; do
  case "$step" in
    base) base_images ;;
    engine) base_images; go_image; engine_images ;;
    operator) base_images; operator_image ;;
    webhook) base_images; webhook_images ;;
    node) base_images; node_image ;;
    all) base_images; go_image; node_image; operator_image; webhook_images; engine_images ;;
    plan) plan; exit 0 ;;
    stamps) stamps; exit 0 ;;
    *) die "unknown step $step (base, engine, operator, webhook, node, plan, stamps, all)" ;;
  esac
done
log "images ready"
