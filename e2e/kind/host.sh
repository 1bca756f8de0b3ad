#!/usr/bin/env bash
# Docker for the kind tier.
#
#   e2e/kind/host.sh start   use the Docker that answers, or install Debian's
#                            docker.io (+ debootstrap, jq) and start a daemon
#                            of our own under the cache; prints DOCKER_HOST=…
#   e2e/kind/host.sh stop    stop the daemon "start" started (and only that)
#
# Our daemon keeps its data, socket, pid file and log under
# $KIND_CACHE/docker, so it never collides with another Docker and its image
# cache survives between runs.
#
# Where the kernel withholds CAP_SYS_RESOURCE from every process (some VMs:
# CapBnd bit 24 clear), `docker run --privileged` fails with
#   OCI runtime create failed: ... unable to apply caps: operation not permitted
# because Docker asks runc for every capability. Our daemon then runs
# containers through a runc wrapper that deletes CAP_SYS_RESOURCE from the
# OCI config first; kind's privileged node containers start with it, and
# nothing inside a node ever needs that capability (see restrict_oom_score_adj
# in images.sh).
set -euo pipefail
# shellcheck source=e2e/kind/lib.sh
source "$(dirname "$0")/lib.sh"

pidfile=$DOCKER_ROOT/dockerd.pid
ours=$DOCKER_ROOT/started-here

answers() { timeout 20 "$DOCKER" info >/dev/null 2>&1; }

need_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v jq >/dev/null || missing+=(jq)
  ((${#missing[@]} == 0)) && return 0
  [[ $(id -u) == 0 ]] || die "need ${missing[*]}: run as root or install them"
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

# cap_sys_resource_withheld: true when CAP_SYS_RESOURCE (bit 24) is missing
# from this process's bounding set.
cap_sys_resource_withheld() {
  local bnd
  bnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  (( (16#$bnd >> 24 & 1) == 0 ))
}

write_wrapper() {
  local runc
  runc=$(command -v runc || echo /usr/sbin/runc)
  cat > "$DOCKER_ROOT/runc-nosysres" <<EOF
#!/usr/bin/env bash
# runc, minus CAP_SYS_RESOURCE in the container's (or exec'd process's)
# capability sets: this kernel withholds it, and asking for it fails every
# privileged container. Written by e2e/kind/host.sh.
set -euo pipefail
# strip FILE PATH: delete CAP_SYS_RESOURCE from every set of the capabilities
# object at PATH (.process.capabilities in config.json, .capabilities in an
# exec's process.json).
strip() {
  jq "if \$2 then \$2 |= map_values(if type == \"array\" then map(select(. != \"CAP_SYS_RESOURCE\")) else . end) else . end" "\$1" > "\$1.nosysres"
  mv "\$1.nosysres" "\$1"
}
args=("\$@")
for ((i = 0; i < \${#args[@]}; i++)); do
  case "\${args[i]}" in
    --bundle|-b) [[ -f "\${args[i+1]}/config.json" ]] && strip "\${args[i+1]}/config.json" .process.capabilities ;;
    --bundle=*) [[ -f "\${args[i]#--bundle=}/config.json" ]] && strip "\${args[i]#--bundle=}/config.json" .process.capabilities ;;
    --process|-p) [[ -f "\${args[i+1]}" ]] && strip "\${args[i+1]}" .capabilities ;;
    --process=*) [[ -f "\${args[i]#--process=}" ]] && strip "\${args[i]#--process=}" .capabilities ;;
  esac
done
exec $runc "\$@"
EOF
  chmod +x "$DOCKER_ROOT/runc-nosysres"
}

start() {
  if [[ -n "${DOCKER_HOST:-}" ]] && answers; then
    log "using the Docker daemon at $DOCKER_HOST"
    echo "DOCKER_HOST=$DOCKER_HOST"; return
  fi
  if [[ -z "${DOCKER_HOST:-}" ]] && answers; then
    log "using the machine's Docker daemon"
    echo "DOCKER_HOST="; return
  fi
  need_packages
  mkdir -p "$DOCKER_ROOT"
  local runtime=()
  if cap_sys_resource_withheld; then
    write_wrapper
    runtime=(--add-runtime "nosysres=$DOCKER_ROOT/runc-nosysres" --default-runtime nosysres)
    log "CAP_SYS_RESOURCE is withheld here: containers run through $DOCKER_ROOT/runc-nosysres"
  fi
  export DOCKER_HOST=unix://$OWN_DOCKER_SOCK
  if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null && answers; then
    log "our Docker daemon is already running (pid $(cat "$pidfile"))"
    echo "DOCKER_HOST=$DOCKER_HOST"; return
  fi
  rm -f "$OWN_DOCKER_SOCK"
  log "starting dockerd (data under $DOCKER_ROOT, log $DOCKER_ROOT/dockerd.log)"
  # At normal priority even when started from a niced build (.ci/run
  # builds the kind tier's images niced, beside other tiers): the daemon,
  # and the kind node it runs, serve the tests after.
  local prio=() n
  n=$(nice)
  if (( n > 0 )) && [[ $(id -u) == 0 ]]; then prio=(nice -n "-$n"); fi
  setsid nohup "${prio[@]}" dockerd --data-root "$DOCKER_ROOT/data" --exec-root /run/registration-engine-kind \
    --pidfile "$pidfile" -H "$DOCKER_HOST" "${runtime[@]}" > "$DOCKER_ROOT/dockerd.log" 2>&1 < /dev/null &
  touch "$ours"
  for _ in $(seq 1 60); do
    answers && { log "dockerd ready"; echo "DOCKER_HOST=$DOCKER_HOST"; return; }
    sleep 1
  done
  tail -20 "$DOCKER_ROOT/dockerd.log" >&2
  die "dockerd did not answer within 60s"
}

stop() {
  [[ -f "$ours" && -f "$pidfile" ]] || { log "no daemon of ours to stop"; return; }
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { log "dockerd still running after 60s, killing it"; kill -9 "$pid"; }
  fi
  rm -f "$ours"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
