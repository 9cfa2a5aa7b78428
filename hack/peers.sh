#!/usr/bin/env bash
# Installs the S3 servers Strata is benchmarked against into hack/peers/bin
# (git-ignored): MinIO and VersityGW, built from source with `go install` at
# pinned versions. A peer already installed at its pinned version is skipped,
# so the slow MinIO build happens once per machine.
#
# Usage: hack/peers.sh [minio|versitygw]...   (default: both)
set -euo pipefail

# `go install github.com/minio/minio@latest` resolves to this pseudo-version
# here (MinIO stopped tagging module versions); pin it so runs compare alike.
MINIO_MODULE=github.com/minio/minio
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
VERSITYGW_MODULE=github.com/versity/versitygw
VERSITYGW_PACKAGE=github.com/versity/versitygw/cmd/versitygw
VERSITYGW_VERSION=v1.8.0

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

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(versitygw minio)
for peer in "${want[@]}"; do
	case $peer in
	minio) install minio "$MINIO_MODULE" "$MINIO_MODULE" "$MINIO_VERSION" ;;
	versitygw) install versitygw "$VERSITYGW_PACKAGE" "$VERSITYGW_MODULE" "$VERSITYGW_VERSION" ;;
	*) echo "peers: unknown peer $peer (want minio or versitygw)" >&2; exit 2 ;;
	esac
done
