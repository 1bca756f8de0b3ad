#!/usr/bin/env bash
# make fuzz [FUZZTIME=30s]: runs every fuzz target of the module, one after
# another, each for FUZZTIME, and prints executions per second. Fails on the
# first crash; go test then writes the failing input under the package's
# testdata/fuzz/<target>/ so that `go test` replays it from then on.
#
# Each input that widens coverage is minimized before fuzzing goes on, for
# at most FUZZMINIMIZETIME (default 5s; go test's own default is 60s, which
# let a single minimization take a whole short run: FuzzVerifyCert reported
# 7 executions in 10s).
set -euo pipefail
cd "$(dirname "$0")/../.."
fuzztime=${1:-30s}
minimize=${FUZZMINIMIZETIME:-5s}
summary=()
while IFS= read -r line; do
  file=${line%%:*}
  target=$(sed -n 's/.*func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' <<<"$line")
  pkg=$(dirname "$file")
  [[ -n "$target" ]] || { echo "fuzz: cannot read a target from: $line" >&2; exit 1; }
  echo "== $pkg $target ($fuzztime)"
  out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" "$pkg" 2>&1) || { echo "$out"; echo "fuzz: $target FAILED"; exit 1; }
  last=$(grep -E 'execs: [0-9]+' <<<"$out" | tail -1)
  execs=$(sed -n 's/.*execs: \([0-9]*\) .*/\1/p' <<<"$last")
  secs=$(sed -n 's/.*elapsed: \([0-9]*\)s.*/\1/p' <<<"$last")
  rate=$(( execs / (secs > 0 ? secs : 1) ))
  found=$(sed -n 's/.*new interesting: \([0-9]*\).*/\1/p' <<<"$last")
  summary+=("$(printf '%-34s %-24s %10s execs  %8s/s  %4s new inputs' "$pkg" "$target" "$execs" "$rate" "${found:-0}")")
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' ./job ./providers ./e2e | sort)
echo
echo "fuzz: every target ran $fuzztime without a failure"
printf '%s\n' "${summary[@]}"
