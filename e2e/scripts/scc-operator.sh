#!/usr/bin/env bash
# Builds the real rancher/scc-operator that the control-plane tests run against
# our Secret, once per commit, into a cache directory outside the repository:
#
#   e2e/scripts/scc-operator.sh [COMMIT...]
#
# Each COMMIT (default: both pinned ones below) ends up as
# $SCC_OPERATOR_DIR/<commit>/operator (default $CACHE_DIR/scc-operator, where
# the tests look). Idempotent: a commit whose binary and stamp are present is
# reused ("cached"). The commits are built one after the other, never side by
# side (each build takes both cores for minutes).
#
# The source of a commit comes from, in this order:
#   SCC_OPERATOR_SRC  a directory or a .tar.gz holding it (only with a single COMMIT)
#   SCC_OPERATOR_GIT=1  git clone $SCC_OPERATOR_REPO and check the commit out
#   $SCC_OPERATOR_PEERS/scc-operator-<short>.tar.gz, where SCC_OPERATOR_PEERS
#     defaults to ../shared/peers relative to the project root
# It is a separate Go module (its own client-go), built in its own directory;
# its modules come from the Go module proxy. Nothing of it lands in this
# repository.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

# dad26bb: branch add-rmt-support (PR #112), the first that trusts registrationUrlCert.
# cee65c0: main, which trusts only the system roots.
PINNED=(dad26bb7a9102580bc74747e4159e83f528a25b8 cee65c0860b6dd26db22363181730b88d4330e5e)
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
SCC_OPERATOR_REPO=${SCC_OPERATOR_REPO:-https://github.com/rancher/scc-operator.git}
SCC_OPERATOR_PEERS=${SCC_OPERATOR_PEERS:-$root/../shared/peers}
SCC_OPERATOR_DIR=${SCC_OPERATOR_DIR:-$CACHE_DIR/scc-operator}
GO_VERSION=$(go env GOVERSION)

commits=("$@")
(( ${#commits[@]} > 0 )) || commits=("${PINNED[@]}")
if [[ -n "${SCC_OPERATOR_SRC:-}" && ${#commits[@]} -ne 1 ]]; then
  echo "scc-operator: SCC_OPERATOR_SRC names one source; give the one COMMIT it holds" >&2
  exit 2
fi

# fetch_source COMMIT DIR puts the operator's source tree for COMMIT into DIR.
fetch_source() {
  local commit=$1 dir=$2 src
  if [[ -n "${SCC_OPERATOR_SRC:-}" ]]; then
    src=$SCC_OPERATOR_SRC
  elif [[ "${SCC_OPERATOR_GIT:-}" == 1 ]]; then
    git clone --quiet "$SCC_OPERATOR_REPO" "$dir"
    git -C "$dir" checkout --quiet --detach "$commit"
    echo "git $SCC_OPERATOR_REPO@$commit"
    return
  else
    src=$SCC_OPERATOR_PEERS/scc-operator-${commit:0:7}.tar.gz
  fi
  if [[ -d "$src" ]]; then
    cp -R "$src/." "$dir/"
  elif [[ -f "$src" ]]; then
    mkdir -p "$dir"
    # The tarballs unpack into scc-operator/.
    tar -xzf "$src" -C "$dir" --strip-components=1
  else
    echo "scc-operator: no source for $commit at $src (set SCC_OPERATOR_SRC, or SCC_OPERATOR_GIT=1)" >&2
    return 1
  fi
  [[ -f "$dir/go.mod" && -d "$dir/cmd/operator" ]] || { echo "scc-operator: $src holds no cmd/operator" >&2; return 1; }
  echo "$src"
}

for commit in "${commits[@]}"; do
  [[ "$commit" =~ ^[0-9a-f]{40}$ ]] || { echo "scc-operator: $commit is not a full commit id" >&2; exit 2; }
  out=$SCC_OPERATOR_DIR/$commit
  mkdir -p "$out"
  # Two builds of one commit at once (two make runs) wait for each other.
  exec 9>"$out/.lock"
  command -v flock >/dev/null && flock 9
  if [[ -x "$out/operator" && -f "$out/.stamp" && "$(sed -n 1p "$out/.stamp")" == "go=$GO_VERSION" ]]; then
    echo "scc-operator: ${commit:0:7} cached in $out/operator"
    exec 9>&-
    continue
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  start=$(date +%s)
  from=$(fetch_source "$commit" "$work/src")
  echo "scc-operator: building ${commit:0:7} from $from" >&2
  (cd "$work/src" && GOTOOLCHAIN=local GOFLAGS='-mod=mod -buildvcs=false' CGO_ENABLED=0 \
    go build -trimpath -ldflags '-s -w' -o "$out/operator.tmp" ./cmd/operator)
  mv "$out/operator.tmp" "$out/operator"
  printf 'go=%s\nsource=%s\n' "$GO_VERSION" "$from" > "$out/.stamp"
  rm -rf "$work"
  trap - EXIT
  exec 9>&-
  echo "scc-operator: ${commit:0:7} built in $(( $(date +%s) - start ))s into $out/operator"
done
