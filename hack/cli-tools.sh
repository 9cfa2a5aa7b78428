#!/usr/bin/env bash
# Builds the command-line tools docs/install.md uses, for the test that runs
# that page (test/localcluster/install_test.go): kubectl at the version of
# the envtest control plane, helm at the version go.mod pins and MinIO's mc
# at MC_VERSION, from the Go module proxy (no release downloads needed).
# Each is built once into bin/ under a versioned name and linked as
# bin/kubectl, bin/helm and bin/mc.
#
#   hack/cli-tools.sh            # prints the directory holding them
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"
# One build at a time (.ci/run starts one in the background, hack/prebuild.sh).
exec 9>"$bin/.cli-tools.lock"
flock 9

k8s=${ENVTEST_K8S_VERSION:-1.36.3}
kubectl_version="v0.${k8s#1.}"   # k8s.io/kubectl tags v0.<minor>.<patch>
helm_version=$(cd "$root" && go list -m -f '{{.Version}}' helm.sh/helm/v3)

kubectl="$bin/kubectl-$kubectl_version"
if [[ ! -x $kubectl ]]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cat > "$scratch/main.go" <<'GO'
// Command kubectl: the kubectl command of k8s.io/kubectl.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
		os.Exit(1)
	}
}
GO
  (
    cd "$scratch"
    go mod init localbuild/kubectl >/dev/null 2>&1
    go get "k8s.io/kubectl@$kubectl_version" "k8s.io/component-base@$kubectl_version" >/dev/null 2>&1
    go mod tidy >/dev/null 2>&1
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$k8s" -o "$kubectl" .
  ) >&2
fi
ln -sf "$(basename "$kubectl")" "$bin/kubectl"

helm="$bin/helm-$helm_version"
if [[ ! -x $helm ]]; then
  scratch_bin=$(mktemp -d)
  GOBIN="$scratch_bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$helm_version" >&2
  mv "$scratch_bin/helm" "$helm"
  rm -rf "$scratch_bin"
fi
ln -sf "$(basename "$helm")" "$bin/helm"
# mc has no tagged module versions; this is the newest the proxy serves.
mc_version=${MC_VERSION:-v0.0.0-20250313080218-cf909e1063a9}
mc="$bin/mc-$mc_version"
if [[ ! -x $mc ]]; then
  scratch_bin=$(mktemp -d)
  GOBIN="$scratch_bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "github.com/minio/mc@$mc_version" >&2
  mv "$scratch_bin/mc" "$mc"
  rm -rf "$scratch_bin"
fi
ln -sf "$(basename "$mc")" "$bin/mc"
echo "$bin"
