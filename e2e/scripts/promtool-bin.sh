#!/usr/bin/env bash
# Puts promtool, Prometheus's rule checker and rule unit tester, into the
# cache once, from Debian's prometheus package: `apt-get download` (no
# install, no service; apt checks the package against its signed index),
# `dpkg-deb -x`, and the binary moved into place, so that an interrupted
# run never leaves a half-written one. The chart's PrometheusRule is tested
# with it (manifests TestChartPrometheusRuleAlerts). Prints the binary's
# path, the only line on stdout.
#
#   e2e/scripts/promtool-bin.sh          build (or reuse); print the binary
#   e2e/scripts/promtool-bin.sh plan     print the Debian revision it would
#                                        take now, downloading nothing; fail
#                                        naming what the mirror has instead
#
# What is pinned is Prometheus's upstream version (PROMETHEUS_VERSION), the
# one the rule tests were written for, not a Debian revision of it: Debian's
# point releases replace a revision (2.42.0+ds-5+b6 became
# 2.42.0+ds-5+deb12u1) without a commit here, so the script takes whatever
# revision of that upstream version the mirror serves now, checks the binary
# by what it is (`promtool --version` names PROMETHEUS_VERSION), and caches
# it under the revision it used. PROMETHEUS_DEB asks for one exact revision;
# when the mirror no longer has it but has another revision of the same
# upstream version, that one is taken and the script says so.
set -euo pipefail
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-2.42.0}
want=${PROMETHEUS_DEB:-}
cache=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
mode=${1:-build}

say() { echo "promtool-bin: $*" >&2; }
# upstream REVISION: the upstream version a Debian revision packs
# (2.42.0+ds-5+deb12u1 -> 2.42.0: no epoch, no Debian revision, no +ds).
upstream() { local v=${1#*:}; v=${v%-*}; echo "${v%%+*}"; }
# offered: the revisions of prometheus the mirror's index lists, newest first.
offered() { apt-cache madison prometheus 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}' | awk '!seen[$0]++'; }
# choose: the revision to take, or fail naming the pin and what there is.
choose() {
  local all rev
  all=$(offered)
  if [[ -n $want ]] && grep -qxF -- "$want" <<<"$all"; then echo "$want"; return; fi
  rev=
  while read -r r; do
    if [[ -n $r && $(upstream "$r") == "$PROMETHEUS_VERSION" ]]; then rev=$r; break; fi
  done <<<"$all"
  if [[ -n $rev ]]; then
    [[ -n $want ]] && say "Debian's mirror no longer has prometheus $want; taking $rev, another revision of the same upstream $PROMETHEUS_VERSION"
    echo "$rev"; return
  fi
  say "Debian's mirror has no prometheus ${want:-$PROMETHEUS_VERSION} (upstream $PROMETHEUS_VERSION); it offers: $(tr '\n' ' ' <<<"${all:-nothing (is the apt index there? apt-get update)}")"
  say "fix: set PROMETHEUS_VERSION (e2e/scripts/promtool-bin.sh) to the upstream version of one of those, and check the rule tests (manifests TestChartPrometheusRuleAlerts) still pass on it"
  return 1
}
# index_fresh: apt's index, read again when it is older than a day (root
# only; elsewhere the index there is used as it is).
index_fresh() {
  local lists=/var/lib/apt/lists
  [[ $(id -u) == 0 ]] || return 0
  if [[ -z $(find "$lists" -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -n1) ]]; then
    apt-get update >&2 || say "apt-get update failed; using the index there is"
  fi
}

if [[ $mode == plan ]]; then
  index_fresh
  choose
  exit
fi

# Any revision of the pinned upstream version already in the cache will do:
# the cache is checked by what the binary is, not by the revision's name.
for c in "$cache"/promtool/*/promtool; do
  [[ -x $c && $(upstream "$(basename "$(dirname "$c")")") == "$PROMETHEUS_VERSION" ]] || continue
  [[ -z $want || $c == "$cache/promtool/$want/promtool" ]] || continue
  echo "$c"
  exit 0
done

index_fresh
rev=$(choose) || { apt-get update >&2 && rev=$(choose); } || exit 1
out="$cache/promtool/$rev/promtool"
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$out.tmp.XXXXXX")
chmod 755 "$tmp" # apt-get download reads it as its _apt user; where it cannot write there it warns and downloads as root
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "prometheus=$rev" >&2) || {
  say "cannot download Debian's prometheus $rev, which the index lists (apt-get update, then try again)"
  exit 1
}
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
# "promtool, version 2.42.0+ds (branch: …)": Debian's build adds +ds.
got=$("$tmp/root/usr/bin/promtool" --version 2>&1 | sed -n 's/^promtool, version \([0-9.]*\).*/\1/p')
[[ $got == "$PROMETHEUS_VERSION" ]] || {
  say "Debian's prometheus $rev holds promtool ${got:-of no version it names}, not $PROMETHEUS_VERSION"
  exit 1
}
mv "$tmp/root/usr/bin/promtool" "$out"
say "promtool $got from Debian's prometheus $rev in $out"
echo "$out"
