#!/usr/bin/env bash
# Checks, in seconds and downloading none of them, that every external thing
# the test tiers fetch is still obtainable at its pin: the Go modules the
# scripts build from the Go module proxy (Kubernetes, etcd, helm, CoreDNS,
# crictl, Azure Workload Identity's webhook, staticcheck, cyclonedx-gomod, and
# the project's own go.mod), Debian's packages (prometheus for promtool, and
# what the kind tier installs and debootstraps), the Debian suite of the kind
# images, the Go toolchain the modules need, and rancher/scc-operator's
# pinned sources. A registry drops a version without a commit here (Debian's
# point release replaced prometheus 2.42.0+ds-5+b6), and a warm cache hides
# it from every machine that built before: `make test` and .ci/run run this
# first, so the rot is named at once, by CI on a warm machine before a
# newcomer meets it.
#
#   e2e/scripts/pins.sh      one line per pin: ok / took / FAIL, the pin, what
#                            the registry offers, and for a FAIL the fix;
#                            exit 1 when a pin is no longer obtainable
#
# The pins are read where they are written (the Makefile passes its own in
# the environment; lib.sh, promtool-bin.sh and scc-operator.sh are read
# here), so that this check cannot drift from them.
# Go modules are asked for with an empty module cache of their own: `go list
# -m` then fetches each version's .info and .mod from the proxy (bytes, not
# the source), so a module the proxy no longer serves fails even where the
# machine's own cache still holds it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=e2e/kind/lib.sh
source "$root/e2e/kind/lib.sh"
start=$(date +%s%N)
fails=0
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

row() { printf '  %-5s %-34s %s\n' "$1" "$2" "$3"; }
bad() { row FAIL "$1" "$2"; printf '        fix: %s\n' "$3"; fails=$((fails + 1)); }
# default_of FILE VAR: the default a script gives VAR (VAR=${VAR:-default}).
default_of() { sed -n "s/^$2=\${$2:-\([^}]*\)}.*/\1/p" "$1" | head -n1; }

K8S_VERSION=${K8S_VERSION:-$(default_of "$here/k8s-testbin.sh" K8S_VERSION)}
K8S_LTS_VERSION=${K8S_LTS_VERSION:-$(sed -n 's/^K8S_LTS_VERSION *?= *//p' "$root/Makefile")}
HELM_VERSION=${HELM_VERSION:-$(default_of "$here/helm-bin.sh" HELM_VERSION)}
STATICCHECK=${STATICCHECK:-$(sed -n 's/^STATICCHECK *:= *//p' "$root/Makefile")}
CYCLONEDX_GOMOD=${CYCLONEDX_GOMOD:-$(sed -n 's/^CYCLONEDX_GOMOD *:= *//p' "$root/Makefile")}
# AZWI_VERSIONS: every webhook release the kind tier builds, from lib.sh
# (sourced above), so each is checked, not only azwi-webhook.sh's default.
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-$(default_of "$here/promtool-bin.sh" PROMETHEUS_VERSION)}
testbin_etcd=$(default_of "$here/k8s-testbin.sh" ETCD_VERSION)

echo "pins: is everything the test tiers fetch still obtainable at its pin? (e2e/scripts/pins.sh)"

# ------------------------------------------------------------ Go modules
# module NAME MODULE VERSION WHERE: one pinned module version.
names=() mods=() vers=() wheres=()
module() { names+=("$1"); mods+=("$2"); vers+=("$3"); wheres+=("$4"); }
module "K8S_VERSION=$K8S_VERSION" k8s.io/kubernetes "v$K8S_VERSION" "K8S_VERSION in the Makefile"
module "K8S_LTS_VERSION=$K8S_LTS_VERSION" k8s.io/kubernetes "v$K8S_LTS_VERSION" "K8S_LTS_VERSION in the Makefile"
module "ETCD_VERSION=$ETCD_VERSION" go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" "ETCD_VERSION in e2e/kind/lib.sh and e2e/scripts/k8s-testbin.sh"
module "HELM_VERSION=$HELM_VERSION" helm.sh/helm/v3 "v$HELM_VERSION" "HELM_VERSION in the Makefile and e2e/scripts/helm-bin.sh"
module "CRICTL_VERSION=$CRICTL_VERSION" sigs.k8s.io/cri-tools "v$CRICTL_VERSION" "CRICTL_VERSION in e2e/kind/lib.sh"
for v in $AZWI_VERSIONS; do
  module "AZWI_VERSION=$v" github.com/Azure/azure-workload-identity "v$v" "AZWI_VERSIONS in e2e/kind/lib.sh"
done
module "STATICCHECK=${STATICCHECK##*@}" "${STATICCHECK%%/cmd/*}" "${STATICCHECK##*@}" "STATICCHECK in the Makefile"
module "CYCLONEDX_GOMOD=${CYCLONEDX_GOMOD##*@}" "${CYCLONEDX_GOMOD%%/cmd/*}" "${CYCLONEDX_GOMOD##*@}" "CYCLONEDX_GOMOD in the Makefile"
# CoreDNS's version is kubeadm's for K8S_VERSION (coredns-bin.sh reads it
# from k8s.io/kubernetes's source); checked when that source is cached.
k8s_dir=$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION
coredns=$(sed -n 's/^[[:space:]]*CoreDNSVersion[[:space:]]*=[[:space:]]*"\(v[^"]*\)".*/\1/p' "$k8s_dir/cmd/kubeadm/app/constants/constants.go" 2>/dev/null | head -n1) || true
coredns=${COREDNS_VERSION:-$coredns}
if [[ -n $coredns ]]; then
  module "CoreDNS=$coredns" github.com/coredns/coredns "v${coredns#v}" "COREDNS_VERSION (e2e/scripts/coredns-bin.sh; by default kubeadm's for K8S_VERSION)"
fi

go_ok() { # go_ok VERSION: the local toolchain builds a module whose go line is VERSION
  [[ -z $1 ]] || [[ $(printf '%s\n%s\n' "$1" "$local_go" | sort -V | tail -n1) == "$local_go" ]]
}
local_go=$(go env GOVERSION | sed 's/^go//')
export GOMODCACHE=$work/mod GOFLAGS=-mod=mod GOTOOLCHAIN=local
# One request per module, side by side: "GOVERSION" or "ERR error". The go
# line is read from the .mod fetched (go list leaves GoVersion empty when it
# is newer than this toolchain: exactly the case to name).
for i in "${!mods[@]}"; do
  (cd "$work" && a=$(go list -m -e -f '{{if .Error}}ERR {{.Error.Err}}{{else}}{{.GoMod}}{{end}}' "${mods[i]}@${vers[i]}" 2>&1 | tr '\n' ' ') &&
    if [[ $a == /* ]]; then sed -n 's/^go \([0-9.]*\).*/\1/p' "${a% }" | head -n1; else echo "$a"; fi > "$work/answer.$i") &
done
wait
# nearest MODULE VERSION: the versions the proxy lists nearest VERSION (same
# minor first), or what it says when it lists none.
nearest() {
  local list same
  list=$(cd "$work" && go list -m -versions "$1" 2>&1) || { echo "(the proxy serves no version list for it)"; return; }
  list=$(tr ' ' '\n' <<<"${list#* }" | grep '^v' || true)
  [[ -n $list ]] || { echo "(it lists no versions)"; return; }
  same=$(grep -F "$(cut -d. -f1,2 <<<"$2")." <<<"$list" | tr '\n' ' ')
  if [[ -n $same ]]; then echo "of ${2%.*}.x it has ${same% }"; else echo "its newest are $(sort -V <<<"$list" | tail -n3 | paste -sd" ")"; fi
}
# unreachable TEXT: the error is the network's, not the registry's answer.
unreachable() { grep -qE 'dial tcp|no such host|i/o timeout|connection refused|network is unreachable|TLS handshake timeout|proxyconnect' <<<"$1"; }
offline=0
for i in "${!mods[@]}"; do
  a=$(cat "$work/answer.$i")
  gov=${a%% *}
  if [[ $gov == ERR || $gov == go:* ]] && unreachable "$a"; then
    offline=$((offline + 1))
  elif [[ $gov == ERR || $gov == go:* ]]; then
    bad "${names[i]}" "${mods[i]} ${vers[i]}: not on the Go module proxy ($(sed 's/^ERR //; s/.*: \([0-9][0-9]* [A-Za-z ]*\).*/\1/' <<<"$a" | cut -c1-80 | sed "s/ *$//")); $(nearest "${mods[i]}" "${vers[i]}")" \
      "set ${wheres[i]} to a version the proxy has, then run the tier that builds it"
  elif ! go_ok "$gov"; then
    bad "${names[i]}" "${mods[i]} ${vers[i]} needs Go $gov; this machine has $local_go" "install Go $gov or newer (the scripts build with GOTOOLCHAIN=local)"
  else
    row ok "${names[i]}" "${mods[i]} ${vers[i]} (go $gov)"
  fi
done
if ((offline)); then
  row "-" "Go module proxy" "cannot reach $(go env GOPROXY | cut -d, -f1): $offline module pin(s) not checked (a warm cache builds without it; a cold one cannot)"
fi
if [[ $testbin_etcd != "$ETCD_VERSION" ]]; then
  bad "ETCD_VERSION" "e2e/kind/lib.sh says $ETCD_VERSION, e2e/scripts/k8s-testbin.sh $testbin_etcd" "write the same version in both"
fi
[[ -n $coredns ]] || row "-" "CoreDNS" "kubeadm's version at K8S_VERSION: checked once k8s.io/kubernetes v$K8S_VERSION is in the module cache (make testbin)"

# The project's own modules (go.mod and go.sum), the same way.
project=${PINS_PROJECT:-$root} # where go.mod is (a test points it elsewhere)
gomod_go=$(sed -n 's/^go //p' "$project/go.mod")
if ! go_ok "$gomod_go"; then
  bad "go.mod go $gomod_go" "this machine has Go $local_go" "install Go $gomod_go or newer"
else
  # In a copy of go.mod and go.sum: go list -m all records in go.sum the
  # hashes of .mod files it had to fetch, and the checkout is not ours to edit.
  mkdir -p "$work/project" && cp "$project/go.mod" "$work/project/" && { cp "$project/go.sum" "$work/project/" 2>/dev/null || true; }
  missing=$(cd "$work/project" && go list -m -e -f '{{if .Error}}{{.Path}}@{{.Version}}: {{.Error.Err}}{{end}}' all 2>&1 | grep . || true)
  if [[ -n $missing ]] && unreachable "$missing"; then
    row "-" "go.mod" "cannot reach the Go module proxy: not checked"
  elif [[ -n $missing ]]; then
    bad "go.mod" "$(head -n3 <<<"$missing" | tr '\n' ' ')" "go get MODULE@VERSION for one the proxy has, then go mod tidy"
  else
    row ok "go.mod" "$(cd "$work/project" && go list -m all | wc -l) modules on the proxy; go $gomod_go (this Go: $local_go)"
  fi
fi
unset GOMODCACHE GOFLAGS

# ------------------------------------------------------------ Debian
# Root reads apt's index anew (seconds): an old index hides a dropped revision.
if [[ $(id -u) == 0 ]]; then
  apt-get update -qq >/dev/null 2>&1 || row "-" "apt index" "apt-get update failed; checking against the index there is"
fi
if rev=$(PROMETHEUS_DEB= "$here/promtool-bin.sh" plan 2>"$work/promtool.err"); then
  row ok "PROMETHEUS_VERSION=$PROMETHEUS_VERSION" "Debian's prometheus $rev (promtool; any revision of $PROMETHEUS_VERSION is taken)"
else
  bad "PROMETHEUS_VERSION=$PROMETHEUS_VERSION" "$(sed -n 1p "$work/promtool.err" | sed 's/^promtool-bin: //')" \
    "$(sed -n 's/^promtool-bin: fix: //p' "$work/promtool.err")"
fi
# One apt-cache call for every package (each call reads the whole index,
# most of a second): "PACKAGE CANDIDATE" per package apt knows.
image_pkgs=$(sed -n 's/^ *debootstrap_to "\$root" //p' "$root/e2e/kind/images.sh" | tr ',' ' ')
apt-cache policy docker.io debootstrap jq $image_pkgs 2>/dev/null |
  awk '/^[^ ].*:$/ {p=substr($0, 1, length($0)-1)} /^ *Candidate:/ && $2 != "(none)" {print p, $2}' >"$work/candidates"
candidate() { awk -v p="$1" '$1 == p {print $2; exit}' "$work/candidates"; }
for p in docker.io debootstrap jq; do
  c=$(candidate "$p")
  if [[ -n $c ]]; then row ok "$p" "Debian's $p $c (the kind tier installs it; not pinned)"; else
    bad "$p" "Debian's index has no $p" "apt-get update; the kind tier (e2e/kind/host.sh) installs it"
  fi
done
# The suite the kind images debootstrap, on the mirror they debootstrap from.
if m=$(mirror 2>/dev/null) && [[ -n $m ]]; then
  if curl -fsSI --max-time 10 "${m%/}/dists/$DEBIAN_SUITE/InRelease" >/dev/null 2>&1; then
    row ok "DEBIAN_SUITE=$DEBIAN_SUITE" "${m%/}/dists/$DEBIAN_SUITE (the kind images' debootstrap)"
  else
    bad "DEBIAN_SUITE=$DEBIAN_SUITE" "${m%/}/dists/$DEBIAN_SUITE/InRelease does not answer" "set DEBIAN_SUITE in e2e/kind/lib.sh to a suite the mirror serves"
  fi
  # The packages they include, where apt's index is of that suite.
  if grep -qs "^VERSION_CODENAME=$DEBIAN_SUITE$" /etc/os-release; then
    gone=()
    for p in $image_pkgs; do
      [[ -n $(candidate "$p") ]] || gone+=("$p")
    done
    if ((${#gone[@]})); then bad "kind image packages" "not in $DEBIAN_SUITE: ${gone[*]}" "drop or rename them in e2e/kind/images.sh"; else
      row ok "kind image packages" "every package e2e/kind/images.sh debootstraps is in $DEBIAN_SUITE"
    fi
  fi
else
  row "-" "DEBIAN_SUITE=$DEBIAN_SUITE" "no apt source of $DEBIAN_SUITE on this machine: the kind tier names its mirror (DEBIAN_MIRROR)"
fi

# ------------------------------------------------------------ sources here
peers=${SCC_OPERATOR_PEERS:-$root/../shared/peers}
for c in $(sed -n 's/^PINNED=(\(.*\))/\1/p' "$here/scc-operator.sh"); do
  if [[ -f $peers/scc-operator-${c:0:7}.tar.gz || -n ${SCC_OPERATOR_SRC:-} ]]; then
    row ok "scc-operator ${c:0:7}" "source in $(basename "$peers")/scc-operator-${c:0:7}.tar.gz"
  else
    bad "scc-operator ${c:0:7}" "no $peers/scc-operator-${c:0:7}.tar.gz" "put the peers beside the checkout (../shared/peers), or set SCC_OPERATOR_SRC or SCC_OPERATOR_GIT=1"
  fi
done

took=$(( ($(date +%s%N) - start) / 1000000 ))
if ((fails)); then
  echo "pins: $fails pin(s) no longer obtainable (checked in ${took} ms): the fix is on the line under each FAIL"
  exit 1
fi
echo "pins: every pin obtainable (checked in ${took} ms)"
