#!/usr/bin/env bash
# Downloads Keycloak's server distribution from Maven Central, checks its
# SHA-1 against the one Maven Central publishes, and unpacks it.
# usage: hack/keycloak.sh VERSION DIR
set -euo pipefail
version=$1 dir=$2
command -v java >/dev/null || { echo "keycloak: needs a Java runtime (17 or newer): apt-get install openjdk-17-jre-headless" >&2; exit 1; }
base=https://repo1.maven.org/maven2/org/keycloak/keycloak-quarkus-dist/$version/keycloak-quarkus-dist-$version.tar.gz
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
curl -sSfL --retry 3 -o "$tmp/kc.tar.gz" "$base"
want=$(curl -sSfL --retry 3 "$base.sha1" | cut -c1-40)
got=$(sha1sum "$tmp/kc.tar.gz" | cut -c1-40)
[ "$want" = "$got" ] || { echo "keycloak: SHA-1 $got of $base, Maven Central says $want" >&2; exit 1; }
mkdir -p "$tmp/x" && tar -xzf "$tmp/kc.tar.gz" -C "$tmp/x" --strip-components=1
rm -rf "$dir" && mkdir -p "$(dirname "$dir")" && mv "$tmp/x" "$dir"
echo "keycloak $version in $dir"
