#!/usr/bin/env bash
# Runs every fuzz target under engine/ for FUZZTIME each (default 3s):
# `make test` runs it short, `make fuzz` long. A failing input is written
# under the package's testdata/fuzz/<target>/ by go test; check it in once
# fixed, so it stays a seed.
set -euo pipefail
fuzztime=${FUZZTIME:-3s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./engine/...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $target in ${pkg#github.com/strata-storage/strata/} for $fuzztime"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" >/dev/null || {
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" 2>&1 | tail -20
			exit 1
		}
	done
done
