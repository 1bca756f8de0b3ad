#!/usr/bin/env bash
# make bench: measure what the engine costs, side by side in one run, and
# rewrite docs/BENCHMARKS.md. Runs one thing at a time (the figures are only
# comparable when nothing of ours competes for the CPU):
#   1. the Go benchmarks with -benchmem (detection at -benchtime=1x: one
#      operation takes seconds), one package at a time;
#   2. the stripped static binary, for its size;
#   3. the image, when a Docker daemon answers;
#   4. e2e/cmd/benchrun: whole-process runs of bin/registration-engine
#      against the fake cloud, the Kubernetes request count against the
#      control plane in $K8S_TESTBIN, and the report.
# `make bench` builds bin/ and the control-plane binaries first.
#
#   BENCH_RUNS=15 K8S_TESTBIN=DIR e2e/scripts/bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$(date +%s)
runs=${BENCH_RUNS:-15}
bin=${BIN:-bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export CGO_ENABLED=0

[[ -x "$bin/registration-engine" ]] || { echo "bench: $bin/registration-engine missing; run make build" >&2; exit 1; }

echo "== bench: Go benchmarks (about a minute for detection alone)"
go test -p 1 -run '^$' -bench 'BenchmarkDetect' -benchtime=1x -count=3 -benchmem ./providers/ | tee "$out/gobench.txt"
go test -p 1 -run '^$' -bench . -benchtime=1s -count=5 -benchmem \
  ./providers/azure/ ./job/smt/ ./job/happyeyeballs/ | tee -a "$out/gobench.txt"

echo "== bench: stripped static binary"
go build -trimpath -ldflags '-s -w' -o "$out/registration-engine" .

echo "== bench: image"
# No registry is needed when the kind tier has run here: its Docker daemon and
# its locally built bases (e2e/kind/images.sh) build the same Dockerfile. We
# start that daemon only if it exists already, and stop it again.
image_bytes=0
build_args=()
stop_docker=
# Where the kind tier keeps its daemon and what it names its bases: from
# e2e/kind/lib.sh, which follows CACHE_DIR as host.sh does.
read -r kind_docker static_image go_image < <(bash -c 'source e2e/kind/lib.sh >/dev/null; echo "$DOCKER_ROOT $STATIC_IMAGE $GO_IMAGE"')
if ! timeout 20 docker info >/dev/null 2>&1 && [[ -d "$kind_docker/data" ]] && command -v dockerd >/dev/null; then
  if host=$(e2e/kind/host.sh start 2>"$out/dockerd.log" | tail -n 1) && [[ $host == DOCKER_HOST=* ]]; then
    export "${host?}"
    [[ -f "$kind_docker/started-here" ]] && stop_docker=1
  fi
fi
if timeout 20 docker info >/dev/null 2>&1; then
  if docker image inspect "$static_image" "$go_image" >/dev/null 2>&1; then
    build_args=(--build-arg "BUILD_IMAGE=$go_image" --build-arg "BASE_IMAGE=$static_image")
    bases="the local bases $go_image and $static_image"
  else
    bases="its default bases"
  fi
fi
if ! command -v docker >/dev/null 2>&1; then
  image_note="not measured: no docker command"
elif ! timeout 20 docker info >/dev/null 2>&1; then
  image_note="not measured: no Docker daemon"
elif DOCKER_BUILDKIT=0 docker build -q "${build_args[@]}" -t registration-engine:bench . >"$out/docker.log" 2>&1; then
  image_bytes=$(docker image inspect -f '{{.Size}}' registration-engine:bench)
  image_note="docker build of the Dockerfile with $bases"
else
  image_note="not measured: docker build failed: $(tail -n 1 "$out/docker.log")"
fi
[[ -n "$stop_docker" ]] && e2e/kind/host.sh stop >/dev/null 2>&1 || true
echo "$image_note"

# What a registered cluster costs its API server per day is measured by
# make e2e-long (TestDailyCostOfARegisteredCluster: minutes of a control
# plane, E2E_UPDATE_BENCHMARKS=1 rewrites its section); benchrun rewrites
# the whole file, so that section is kept and put back before "## Machine".
sed -n '/^<!-- dailycost:/,/^<!-- \/dailycost -->/p' docs/BENCHMARKS.md > "$out/dailycost.md" || true

echo "== bench: whole-process runs, Kubernetes requests, report"
go build -o "$out/benchrun" ./e2e/cmd/benchrun
go build -o "$out/spawn" ./e2e/cmd/benchrun/spawn
"$out/benchrun" \
  --engine "$bin/registration-engine" \
  --spawn "$out/spawn" \
  --stripped "$out/registration-engine" \
  --gobench "$out/gobench.txt" \
  --testbin "${K8S_TESTBIN:-}" \
  --runs "$runs" \
  --image-bytes "$image_bytes" --image-note "$image_note" \
  --revision "$(git describe --tags --always --dirty 2>/dev/null || echo unknown)" \
  --started "$started" \
  --out docs/BENCHMARKS.md
# The fleet's load at the region servers: helm renders each cluster's
# schedule (benchrun rewrote the file; this adds its section).
if [[ -n "${HELM_BIN:-}" && -x "${HELM_BIN}" ]]; then
  echo "== bench: fleet load (e2e/cmd/fleetsim, 1000 clusters)"
  go run ./e2e/cmd/fleetsim -helm "$HELM_BIN" -clusters 1000 -days 6 -seed 1 -outage 2h,12h -draws 10 -update docs/BENCHMARKS.md
fi
if [[ -s "$out/dailycost.md" ]] && ! grep -q '^<!-- dailycost:' docs/BENCHMARKS.md; then
  awk -v kept="$out/dailycost.md" '/^## Machine/ && !done { while ((getline line < kept) > 0) print line; print ""; done = 1 } { print }' \
    docs/BENCHMARKS.md > "$out/BENCHMARKS.md" && mv "$out/BENCHMARKS.md" docs/BENCHMARKS.md
fi
echo "== bench: done in $(( $(date +%s) - started )) s; see docs/BENCHMARKS.md"
