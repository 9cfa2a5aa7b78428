#!/usr/bin/env bash
# Runs every fuzz target under engine/ for FUZZTIME each (default 3s): a
# duration, or a count of executions such as 3000x. `make test` runs a count
# (`make fuzz-smoke`), `make fuzz` a minute. Go's fuzz coordinator before
# 1.27 can end a duration with a spurious "context deadline exceeded" and no
# failing input (go.dev/issue/75804: its own deadline leaks past the check
# that takes it for a normal stop); a count sets no deadline. A failing input
# is written under the package's testdata/fuzz/<target>/ by go test; check it
# in once fixed, so it stays a seed.
set -euo pipefail
fuzztime=${FUZZTIME:-3s}
cd "$(dirname "$0")/.."
seeds() { if [ -d "$1" ]; then ls "$1" | wc -l; else echo 0; fi; }
for pkg in $(go list ./engine/...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $target in ${pkg#github.com/strata-storage/strata/} for $fuzztime"
		dir=$(go list -f '{{.Dir}}' "$pkg")/testdata/fuzz/$target
		# (a target without checked-in inputs has no such directory)
		before=$(seeds "$dir")
		if ! out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" 2>&1); then
			echo "$out" | tail -20
			# A failing input is written under testdata and fails every run
			# from then on. A run that failed without one (a worker that
			# hung or died on a loaded machine) is run once more: only a
			# second failure, or a new input, fails the target.
			if [ "$(seeds "$dir")" != "$before" ] ||
				! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel 2 "$pkg" >/dev/null 2>&1; then
				echo "fuzz: $target failed"
				exit 1
			fi
			echo "fuzz: $target failed once without a failing input, then passed (the output above)"
		fi
	done
done
