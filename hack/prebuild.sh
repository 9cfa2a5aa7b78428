#!/usr/bin/env bash
# Builds what the last steps of `make test` need from the Go module proxy
# (the nodes' Kubernetes binaries and CoreDNS, prometheus-operator and
# Prometheus, kubectl, helm and mc), at the lowest CPU and I/O priority.
# `make test` starts it in the background (prebuild-background) when the
# engine's integration tests begin: on a machine whose caches are cold
# these builds then use the CPU those tests and the conformance suite
# leave idle (they mostly wait on their servers: 35-90% of the CPU was
# idle through them), instead of adding 10 minutes after them. Each script
# takes a lock, so a step of `make test` that reaches one while it builds
# waits for it rather than building the same thing again; with warm
# caches it finds everything built and ends in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
low() { nice -n 19 ionice -c 3 "$@" >/dev/null; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
low hack/envtest.sh --nodes
low hack/monitoring-images.sh "$scratch" # fills its cache; `make monitoring-images` writes bin/images
low hack/cli-tools.sh
echo "prebuild: done"
