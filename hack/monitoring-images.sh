#!/usr/bin/env bash
# Makes what `localcluster up --monitoring` runs besides our own images:
# prometheus-operator, its config reloader and Prometheus as OCI image
# layouts, and prometheus-operator's CRDs, all from the Go module proxy (no
# registry, no daemon).
#
# The binaries (static, CGO_ENABLED=0) and the CRDs are built once into a
# cache directory per component, version and platform, each in a
# throwaway module of its own (the two projects pin different versions of
# shared dependencies), so later runs only repackage them (a few seconds).
# The images get the references prometheus-operator puts in the pods it
# creates, the entrypoints and users of the upstream images, and the
# release images' base (internal/images).
#
#   usage: hack/monitoring-images.sh IMAGES_DIR
#
# Writes IMAGES_DIR/prometheus-operator/, prometheus-config-reloader/,
# prometheus/ (layouts) and IMAGES_DIR/prometheus-operator-crds/*.yaml.
# Prometheus is built without its web UI assets (they are not in the Go
# module): the HTTP API and /-/ready work, the UI pages answer 500. Its
# only service discovery is kubernetes_sd_configs (and file and http).
set -euo pipefail

OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-0.85.0}
# prometheus-operator v0.85.0's default Prometheus (the last of its
# compatibility matrix).
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-3.5.0}
CACHE=${STRATA_MONITORING_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/monitoring}

out=${1:?usage: hack/monitoring-images.sh IMAGES_DIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
platform="$(go env GOOS)-$(go env GOARCH)"
op_dir="$CACHE/prometheus-operator-v${OPERATOR_VERSION}-${platform}"
prom_dir="$CACHE/prometheus-v${PROMETHEUS_VERSION}-k8s-sd-${platform}"

log() { echo "monitoring-images: $*" >&2; }

# Prometheus 3.x is the Go module github.com/prometheus/prometheus
# v0.3MM.P for v3.MM.P.
prometheus_module_version() {
  local major minor patch
  IFS=. read -r major minor patch <<<"$1"
  echo "v0.$((major * 100 + minor)).${patch}"
}

# throwaway_module DIR MODULE@VERSION PACKAGE... writes a module requiring
# MODULE@VERSION whose tools.go imports the packages, and resolves it.
throwaway_module() {
  local dir=$1 req=$2
  shift 2
  mkdir -p "$dir"
  printf 'module strata.local/monitoring-build\n\ngo 1.26\n\nrequire %s %s\n' "${req%@*}" "${req#*@}" >"$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for p in "$@"; do printf '\t_ "%s"\n' "$p"; done
    printf ')\n'
  } >"$dir/tools.go"
}

# version_ldflags VERSION: what prometheus/common/version reports (the
# operator also derives its default config reloader image from it).
version_ldflags() {
  local v=github.com/prometheus/common/version
  echo "-s -w -X $v.Version=$1 -X $v.Revision=v$1 -X $v.Branch=v$1 -X $v.BuildUser=strata -X $v.BuildDate=19700101-00:00:00"
}

build_operator() {
  local work=$1 mod=github.com/prometheus-operator/prometheus-operator
  local tmp="$op_dir.building"
  rm -rf "$tmp" && mkdir -p "$tmp/crds"
  throwaway_module "$work/operator" "$mod@v${OPERATOR_VERSION}" "$mod/cmd/operator" "$mod/cmd/prometheus-config-reloader"
  (
    cd "$work/operator"
    GOFLAGS=-mod=mod go mod tidy >&2
    for c in operator prometheus-config-reloader; do
      log "building prometheus-operator's $c v${OPERATOR_VERSION} (minutes on 2 cores the first time)"
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$(version_ldflags "$OPERATOR_VERSION")" -o "$tmp/$c" "$mod/cmd/$c"
    done
    src=$(go mod download -json "$mod@v${OPERATOR_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    install -m 0644 "$src"/example/prometheus-operator-crd/*.yaml "$tmp/crds/"
  )
  rm -rf "$op_dir" && mv "$tmp" "$op_dir"
}

build_prometheus() {
  local work=$1 mod=github.com/prometheus/prometheus
  local modv tmp="$prom_dir.building"
  modv=$(prometheus_module_version "$PROMETHEUS_VERSION")
  rm -rf "$tmp" && mkdir -p "$tmp"
  throwaway_module "$work/prometheus" "$mod@$modv" "$mod/cmd/prometheus"
  (
    cd "$work/prometheus"
    # Prometheus' own go.mod replaces fsnotify v1.8.0 by v1.7.0; a
    # dependent module must say so itself.
    if gomod=$(go mod download -json "$mod@$modv" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p') &&
      grep -q '^replace github.com/fsnotify/fsnotify v1.8.0 => github.com/fsnotify/fsnotify v1.7.0' "$gomod"; then
      echo 'replace github.com/fsnotify/fsnotify v1.8.0 => github.com/fsnotify/fsnotify v1.7.0' >>go.mod
    fi
    # Only the service discovery prometheus-operator's configuration uses
    # (kubernetes_sd_configs; file and http are always in): Prometheus
    # registers its discovery mechanisms by importing them from one file,
    # plugins/plugins.go, so a copy of the module with that file naming
    # only kubernetes builds without the cloud SDKs (AWS, Azure, GCE,
    # OpenStack, ...: a sixth of the packages and most of the compile).
    local src
    src=$(go mod download -json "$mod@$modv" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    cp -r "$src" module && chmod -R u+w module
    printf '// Written by hack/monitoring-images.sh: the kubernetes discovery only.\n\npackage plugins\n\nimport _ "github.com/prometheus/prometheus/discovery/kubernetes"\n' >module/plugins/plugins.go
    echo "replace $mod => ./module" >>go.mod
    GOFLAGS=-mod=mod go mod tidy >&2
    log "building Prometheus v${PROMETHEUS_VERSION} ($modv, kubernetes discovery only; minutes on 2 cores the first time)"
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags netgo -ldflags "$(version_ldflags "$PROMETHEUS_VERSION")" \
      -o "$tmp/prometheus" "$mod/cmd/prometheus"
  )
  rm -rf "$prom_dir" && mv "$tmp" "$prom_dir"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One build at a time (.ci/run starts one in the background, hack/prebuild.sh).
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9
[[ -x "$op_dir/operator" && -x "$op_dir/prometheus-config-reloader" && -d "$op_dir/crds" ]] || build_operator "$work"
[[ -x "$prom_dir/prometheus" ]] || build_prometheus "$work"

log "writing the images into $out"
mkdir -p "$out"
(
  cd "$repo"
  po=quay.io/prometheus-operator
  go run ./hack/images -out "$out" \
    -image "ref=$po/prometheus-operator:v${OPERATOR_VERSION},entrypoint=/bin/operator,user=65534:65534,binary=$op_dir/operator,source=https://github.com/prometheus-operator/prometheus-operator" \
    -image "ref=$po/prometheus-config-reloader:v${OPERATOR_VERSION},entrypoint=/bin/prometheus-config-reloader,user=65534:65534,binary=$op_dir/prometheus-config-reloader,source=https://github.com/prometheus-operator/prometheus-operator" \
    -image "ref=quay.io/prometheus/prometheus:v${PROMETHEUS_VERSION},entrypoint=/bin/prometheus,user=65534:65534,workdir=/prometheus,binary=$prom_dir/prometheus,source=https://github.com/prometheus/prometheus" >&2
)
rm -rf "$out/prometheus-operator-crds"
mkdir -p "$out/prometheus-operator-crds"
install -m 0644 "$op_dir"/crds/*.yaml "$out/prometheus-operator-crds/"
log "ready: prometheus-operator v${OPERATOR_VERSION}, Prometheus v${PROMETHEUS_VERSION}"
