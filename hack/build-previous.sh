#!/usr/bin/env bash
# build-previous.sh REV OUT: builds cmd/strata as of commit REV into OUT, for
# the tests that run an older build next to this one (TestClusterMixedBuilds).
# The source comes from git (git archive), the modules from the Go cache; a
# build of the same REV is reused. Without REV in the history (a shallow
# clone), OUT is removed and the tests say they skip, unless STRATA_CI is
# set, where that is an error.
set -euo pipefail
rev=$1 out=$2
cd "$(dirname "$0")/.."
if ! git cat-file -e "$rev^{commit}" 2>/dev/null; then
  rm -f "$out"
  if [ -n "${STRATA_CI:-}" ]; then
    echo "build-previous: commit $rev is not in this clone's history" >&2
    exit 1
  fi
  echo "build-previous: commit $rev not in history; mixed-build tests will skip" >&2
  exit 0
fi
full=$(git rev-parse "$rev^{commit}")
if [ -x "$out" ] && [ "$(cat "$out.rev" 2>/dev/null)" = "$full" ]; then
  exit 0
fi
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git archive "$full" | tar -x -C "$src"
(cd "$src" && go build -ldflags "-X github.com/strata-storage/strata/engine/buildinfo.Version=previous-${full:0:7}" -o "$out" ./cmd/strata)
echo "$full" > "$out.rev"
