#!/usr/bin/env bash
# Makes kube-apiserver and etcd (and, on request, kube-controller-manager and
# kube-scheduler) available to envtest without downloading prebuilt binaries.
#
# Order of preference:
#   1. $KUBEBUILDER_ASSETS when it already holds kube-apiserver and etcd;
#   2. the standard envtest assets directory (setup-envtest's store);
#   3. setup-envtest (works where its download bucket is reachable);
#   4. a build from the Go module proxy, installed into the standard directory,
#      so the next run costs nothing.
#
# Prints the assets directory on stdout (and nothing else); progress goes to stderr.
#   usage: hack/envtest.sh [--control-plane | --nodes]
#   --control-plane  also build kube-controller-manager and kube-scheduler
#   --nodes          the control plane plus what a node runs: kubelet and
#                    kube-proxy, and CoreDNS for the cluster DNS
set -euo pipefail

K8S_VERSION=${ENVTEST_K8S_VERSION:-1.36.3}
ETCD_VERSION=${ENVTEST_ETCD_VERSION:-3.6.5}
COREDNS_VERSION=${ENVTEST_COREDNS_VERSION:-1.15.0}
GOOS=$(go env GOOS)
GOARCH=$(go env GOARCH)
STORE=${ENVTEST_STORE:-${XDG_DATA_HOME:-$HOME/.local/share}/kubebuilder-envtest}
ASSETS="$STORE/k8s/${K8S_VERSION}-${GOOS}-${GOARCH}"

want=(kube-apiserver etcd)
case "${1:-}" in
--control-plane) want+=(kube-controller-manager kube-scheduler) ;;
--nodes) want+=(kube-controller-manager kube-scheduler kubelet kube-proxy coredns) ;;
esac

log() { echo "envtest: $*" >&2; }

has_all() {
  local dir=$1 b
  for b in "${want[@]}"; do [[ -x "$dir/$b" ]] || return 1; done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && has_all "$KUBEBUILDER_ASSETS"; then
  echo "$KUBEBUILDER_ASSETS"; exit 0
fi
if has_all "$ASSETS"; then
  echo "$ASSETS"; exit 0
fi

# setup-envtest only ever provides kube-apiserver, etcd and kubectl.
if [[ ${#want[@]} -eq 2 && -z "${ENVTEST_SKIP_DOWNLOAD:-}" ]]; then
  log "trying setup-envtest for ${K8S_VERSION}"
  if dir=$(timeout 120 go run sigs.k8s.io/controller-runtime/tools/setup-envtest@release-0.22 \
      use "${K8S_VERSION}" --bin-dir "$STORE" -p path 2>/dev/null) && has_all "$dir"; then
    echo "$dir"; exit 0
  fi
  log "setup-envtest could not provide binaries; building from the Go module proxy"
fi

mkdir -p "$ASSETS"
# One build at a time (.ci/run starts one in the background, hack/prebuild.sh):
# whoever comes second waits, then finds the binaries.
exec 9>"$ASSETS/.build.lock"
flock 9
if has_all "$ASSETS"; then
  echo "$ASSETS"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_kubernetes() {
  local cmds=("$@")
  local mod="$work/kube"
  mkdir -p "$mod"
  (
    cd "$mod"
    cat >go.mod <<MOD
module strata.local/envtest-kube

go 1.26

require k8s.io/kubernetes v${K8S_VERSION}
MOD
    # k8s.io/kubernetes points its staging modules at ./staging/src/k8s.io/X,
    # which a dependent module cannot see: map each to its published v0.Y.Z.
    gomod=$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    staging_version="v0.${K8S_VERSION#1.}"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" |
      awk '{print $1}' | sort -u | while read -r m; do
        echo "replace $m => $m $staging_version" >>go.mod
      done
    printf 'package tools\n\nimport (\n' >tools.go
    for c in "${cmds[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>tools.go; done
    printf ')\n' >>tools.go
    sed -i '1s/^/\/\/go:build tools\n\n/' tools.go
    GOFLAGS=-mod=mod go mod tidy -e >&2 2>&1 || true
    local ld="-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION}"
    ld+=" -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*}"
    local minor=${K8S_VERSION#*.}; minor=${minor%%.*}
    ld+=" -X k8s.io/component-base/version.gitMinor=${minor}"
    ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
    # One go build for all of them: they share most packages, and their
    # links (long, mostly on one core each) run side by side.
    local pkgs=()
    for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    log "building ${cmds[*]} v${K8S_VERSION} (several minutes on 2 cores the first time)"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$ASSETS/" "${pkgs[@]}"
  )
}

build_etcd() {
  local mod="$work/etcd"
  mkdir -p "$mod"
  (
    cd "$mod"
    cat >go.mod <<MOD
module strata.local/envtest-etcd

go 1.26

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
MOD
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
    GOFLAGS=-mod=mod go mod tidy -e >&2 2>&1 || true
    log "building etcd v${ETCD_VERSION}"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$ASSETS/etcd" go.etcd.io/etcd/server/v3
  )
}

# build_coredns builds CoreDNS with only the plugins a cluster DNS without
# upstream needs; the Corefile of hack/localcluster uses no other.
build_coredns() {
  local mod="$work/coredns"
  mkdir -p "$mod"
  (
    cd "$mod"
    cat >go.mod <<MOD
module strata.local/envtest-coredns

go 1.26

require github.com/coredns/coredns v${COREDNS_VERSION}
MOD
    cat >main.go <<'SRC'
// The cluster DNS of hack/localcluster: CoreDNS with a chosen plugin set.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
)

func init() {
	// The order plugins run in, as CoreDNS's plugin.cfg lists them.
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "loadbalance", "cache", "template", "kubernetes"}
}

func main() { coremain.Run() }
SRC
    GOFLAGS=-mod=mod go mod tidy -e >&2 2>&1 || true
    log "building coredns v${COREDNS_VERSION}"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$ASSETS/coredns" .
  )
}

[[ -x "$ASSETS/etcd" ]] || build_etcd
missing=()
for b in "${want[@]}"; do
  [[ "$b" == etcd || "$b" == coredns || -x "$ASSETS/$b" ]] || missing+=("$b")
done
if [[ " ${want[*]} " == *" coredns "* && ! -x "$ASSETS/coredns" ]]; then build_coredns; fi
[[ ${#missing[@]} -eq 0 ]] || build_kubernetes "${missing[@]}"

has_all "$ASSETS" || { log "binaries missing in $ASSETS after build"; exit 1; }
log "ready in $ASSETS"
echo "$ASSETS"
