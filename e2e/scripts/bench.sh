#!/usr/bin/env bash
# make bench: measure what the engine costs, side by side in one run, and
# rewrite BENCHMARKS.md. Runs one thing at a time (the figures are only
# comparable when nothing of ours competes for the CPU):
#   1. the Go benchmarks with -benchmem (detection at -benchtime=1x: one
#      operation takes seconds), one package at a time;
#   2. the stripped static binary, for its size (and the same unstripped,
#      for the symbols that say what it is made of);
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

echo "== bench: stripped static binary (and an unstripped one for what it is made of)"
go build -trimpath -ldflags '-s -w' -o "$out/registration-engine" .
go build -trimpath -o "$out/registration-engine.symbols" .

echo "== bench: image"
image_bytes=0
if ! command -v docker >/dev/null 2>&1; then
  image_note="not measured: no docker command"
elif ! timeout 20 docker info >/dev/null 2>&1; then
  image_note="not measured: no Docker daemon"
elif docker build -q -t registration-engine:bench . >"$out/docker.log" 2>&1; then
  image_bytes=$(docker image inspect -f '{{.Size}}' registration-engine:bench)
  image_note="docker build of the Dockerfile with its default bases"
else
  image_note="not measured: docker build failed: $(tail -n 1 "$out/docker.log")"
fi
echo "$image_note"

echo "== bench: whole-process runs, Kubernetes requests, report"
go build -o "$out/benchrun" ./e2e/cmd/benchrun
go build -o "$out/spawn" ./e2e/cmd/benchrun/spawn
"$out/benchrun" \
  --engine "$bin/registration-engine" \
  --spawn "$out/spawn" \
  --stripped "$out/registration-engine" \
  --unstripped "$out/registration-engine.symbols" \
  --gobench "$out/gobench.txt" \
  --testbin "${K8S_TESTBIN:-}" \
  --runs "$runs" \
  --image-bytes "$image_bytes" --image-note "$image_note" \
  --revision "$(git describe --tags --always --dirty 2>/dev/null || echo unknown)" \
  --started "$started" \
  --out BENCHMARKS.md
echo "== bench: done in $(( $(date +%s) - started )) s; see BENCHMARKS.md"
