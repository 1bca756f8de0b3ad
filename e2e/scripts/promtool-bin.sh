#!/usr/bin/env bash
# Puts promtool, Prometheus's rule checker and rule unit tester, into the
# cache once, from Debian's prometheus package: `apt-get download` (no
# install, no service; apt checks the package against its signed index),
# `dpkg-deb -x`, and the binary moved into place, so that an interrupted
# run never leaves a half-written one. The chart's PrometheusRule is tested
# with it (manifests TestChartPrometheusRuleAlerts). Prints the binary's
# path, the only line on stdout.
#
#   e2e/scripts/promtool-bin.sh     (CACHE_DIR; PROMETHEUS_DEB, default the
#                                    version below)
set -euo pipefail
deb=${PROMETHEUS_DEB:-2.42.0+ds-5+b6}
cache=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/registration-engine}
out="$cache/promtool/$deb/promtool"
if [[ -x $out ]]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$out.tmp.XXXXXX")
chmod 755 "$tmp" # apt-get download reads it as its _apt user; where it cannot write there it warns and downloads as root
trap 'rm -rf "$tmp"' EXIT
download() { (cd "$tmp" && apt-get download "prometheus=$deb" >&2); }
download || { apt-get update >&2 && download; } || {
  echo "promtool-bin: cannot download Debian's prometheus $deb (apt-cache policy prometheus lists what the mirror has; set PROMETHEUS_DEB)" >&2
  exit 1
}
dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
"$tmp/root/usr/bin/promtool" --version >/dev/null
mv "$tmp/root/usr/bin/promtool" "$out"
echo "promtool-bin: promtool from Debian's prometheus $deb in $out" >&2
echo "$out"
