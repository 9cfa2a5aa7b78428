#!/usr/bin/env bash
# Fails when a generated file in the work tree differs from what the
# generators produce from the current sources, or when go.mod/go.sum are not
# tidy. Generation runs in a scratch copy, so the work tree is never changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Everything generation writes. Keep in step with `make generate manifests`.
generated=(
  api/v1alpha1/zz_generated.deepcopy.go
  engine/buildinfo/zz_generated_release.go
  config/crd/bases
  config/rbac/role.yaml
  config/webhook/manifests.yaml
  charts/strata-operator/crds
  charts/strata-operator/templates/manager-rbac.yaml
  charts/strata-operator/templates/webhook-configurations.yaml
  bundle/manifests
  bundle/metadata
  bundle/tests
)

# Files hack/release rewrites in place (the lines naming the release's
# version and images): compared, not removed before generation.
rewritten=(
  Dockerfile
  charts/strata-operator/Chart.yaml
  charts/strata-operator/values.yaml
  charts/strata-tenant/Chart.yaml
  charts/strata-tenant/values.yaml
  config/manager/kustomization.yaml
  config/manager/manager.yaml
)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Copy the tracked and untracked (not ignored) files: what a commit would hold.
git ls-files -co --exclude-standard -z | xargs -0 -I{} cp --parents -- {} "$scratch" 2>/dev/null || true
mkdir -p "$scratch/bin"
# Reuse installed tools (controller-gen) instead of rebuilding them.
cp -a bin/. "$scratch/bin/" 2>/dev/null || true
for g in "${generated[@]}"; do rm -rf "${scratch:?}/$g"; done

make -C "$scratch" --no-print-directory generate manifests >/dev/null
# Keep newly installed tools for the next run.
cp -an "$scratch/bin/." bin/ 2>/dev/null || true

status=0
for g in "${generated[@]}" "${rewritten[@]}"; do
  [[ -e $g || -e $scratch/$g ]] || continue
  if ! diff -ruN "$g" "$scratch/$g" >/dev/null 2>&1; then
    echo "stale generated file(s): $g" >&2
    diff -ruN "$g" "$scratch/$g" | head -40 >&2 || true
    status=1
  fi
done
if ! go mod tidy -diff >/dev/null 2>&1; then
  echo "go.mod/go.sum are not tidy: run go mod tidy" >&2
  go mod tidy -diff | head -40 >&2 || true
  status=1
fi
if [[ $status -ne 0 ]]; then
  echo "run: make generate manifests && go mod tidy, then commit the result" >&2
fi
exit $status
