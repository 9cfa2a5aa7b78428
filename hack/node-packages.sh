#!/usr/bin/env bash
# Installs what the local cluster's nodes run besides the Kubernetes
# binaries (hack/envtest.sh --nodes): containerd, runc and the CNI plugins
# from Debian's packages, when any is missing. Needs root and apt-get.
set -euo pipefail

missing=()
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
for p in bridge host-local loopback; do
  [[ -x /usr/lib/cni/$p ]] || { missing+=(containernetworking-plugins); break; }
done
command -v iptables-restore >/dev/null 2>&1 || missing+=(iptables)
[[ ${#missing[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "node-packages: missing ${missing[*]} and no apt-get to install them (docs/localcluster.md, Requirements)" >&2
  exit 1
fi
echo "node-packages: installing ${missing[*]} with apt-get" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
