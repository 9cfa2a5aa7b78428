#!/usr/bin/env bash
# Installs the S3 servers Strata is benchmarked against into hack/peers/bin
# (git-ignored): MinIO and VersityGW, built from source with `go install` at
# pinned versions, and Garage, built from crates.io with `cargo install`. A
# peer already installed at its pinned version is skipped, so the slow MinIO
# and Garage builds happen once per machine.
#
# Usage: hack/peers.sh [minio|versitygw|garage]...   (default: all three)
set -euo pipefail

# `go install github.com/minio/minio@latest` resolves to this pseudo-version
# here (MinIO stopped tagging module versions); pin it so runs compare alike.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
VERSITYGW_MODULE=github.com/versity/versitygw
VERSITYGW_PACKAGE=github.com/versity/versitygw/cmd/versitygw
VERSITYGW_VERSION=v1.8.0
# Garage's release of 2026-10-24 (crates.io), the version issue 36 measured.
GARAGE_VERSION=2.5.0

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/hack/peers/bin"
mkdir -p "$bin"

# installed_version BINARY MODULE prints the version of MODULE that BINARY was
# built from (empty when the binary is missing or foreign).
installed_version() {
	[[ -x $1 ]] || return 0
	go version -m "$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3 }'
}

# install NAME PACKAGE MODULE VERSION
install() {
	local name=$1 pkg=$2 module=$3 version=$4
	local have
	have=$(installed_version "$bin/$name" "$module")
	if [[ $have == "$version" ]]; then
		echo "peers: $name $version already installed"
		return 0
	fi
	echo "peers: building $name $version (${have:+replacing $have, }this can take a while on 2 cores)"
	# A throwaway module cache is not used on purpose: the shared one makes a
	# re-run after an interrupted build cheap. CGO is off so the binaries need
	# nothing from the host.
	GOBIN="$bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false nice go install "$pkg@$version"
	echo "peers: $name $(installed_version "$bin/$name" "$module") installed in $bin"
}

# install_garage builds Garage with cargo into $bin (its own lock file, so
# the dependencies are the ones its release was tested with). cargo comes
# from rustup; .ci/run does not build peers, benchmarks do.
install_garage() {
	local have=""
	[[ -x $bin/garage ]] && have=$("$bin/garage" --version 2>/dev/null | awk '{print $2}' | sed 's/^cargo://; s/^v//')
	if [[ $have == "$GARAGE_VERSION" ]]; then
		echo "peers: garage $GARAGE_VERSION already installed"
		return 0
	fi
	local cargo
	cargo=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
	[[ -x $cargo ]] || { echo "peers: garage needs cargo (rustup: https://rustup.rs)" >&2; exit 1; }
	echo "peers: building garage $GARAGE_VERSION with cargo (${have:+replacing $have, }about half an hour on 2 cores)"
	local tmp="$root/hack/peers/cargo"
	nice "$cargo" install --locked --quiet --root "$tmp" --version "$GARAGE_VERSION" garage
	command install -m 0755 "$tmp/bin/garage" "$bin/garage"
	echo "peers: garage $GARAGE_VERSION installed in $bin"
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(versitygw minio garage)
for peer in "${want[@]}"; do
	case $peer in
	minio) install minio "$MINIO_MODULE" "$MINIO_MODULE" "$MINIO_VERSION" ;;
	versitygw) install versitygw "$VERSITYGW_PACKAGE" "$VERSITYGW_MODULE" "$VERSITYGW_VERSION" ;;
	garage) install_garage ;;
	*) echo "peers: unknown peer $peer (want minio, versitygw or garage)" >&2; exit 2 ;;
	esac
done
