#!/usr/bin/env bash
# make demo [FAULT=name]: start the fake cloud on loopback, run the engine
# once against it with no cluster (--dry-run), show the Secret it would
# write, stop the fake cloud, and exit with the engine's exit code.
set -uo pipefail
cd "$(dirname "$0")/../.."
fault=${1:-}
bin=${BIN:-bin}

if [[ "$fault" == "help" ]]; then
  "$bin/fakecloud" --list-faults
  exit 0
fi

dir=$(mktemp -d)
fc_pid=
cleanup() {
  [[ -n "$fc_pid" ]] && kill "$fc_pid" 2>/dev/null && wait "$fc_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$bin/fakecloud" --dir "$dir" ${fault:+--fault "$fault"} >"$dir/fakecloud.log" 2>&1 &
fc_pid=$!
for _ in $(seq 1 100); do
  [[ -f "$dir/ready" ]] && break
  if ! kill -0 "$fc_pid" 2>/dev/null; then
    echo "demo: fakecloud did not start:" >&2; cat "$dir/fakecloud.log" >&2; exit 1
  fi
  sleep 0.1
done
[[ -f "$dir/ready" ]] || { echo "demo: fakecloud not ready after 10s" >&2; cat "$dir/fakecloud.log" >&2; exit 1; }

echo "== fake cloud up${fault:+ with fault \"$fault\"} (every endpoint on loopback; see $dir/env while it runs)"
set -a
# shellcheck disable=SC1091
source "$dir/env"
REGISTRATION_CODE=${REGISTRATION_CODE:-DEMO-REGISTRATION-CODE}
set +a
echo "== registration-engine --dry-run"
"$bin/registration-engine" --dry-run --log-format=text
rc=$?
case $rc in
  0) what="registered (dry run: nothing written)";;
  1) what="transient failure: the Job would retry";;
  2) what="permanent failure: the Job would fail without retries";;
  124) what="run deadline exceeded";;
  143) what="terminated";;
  *) what="unexpected";;
esac
echo "== exit code $rc: $what"
exit $rc
