#!/usr/bin/env bash
# Installs the message brokers the notification tests start themselves
# that come from Debian's packages (Redis, RabbitMQ), when missing, without leaving
# the package's own service running. Needs root and apt-get. NATS is built
# from the Go module proxy instead (make brokers).
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
[[ ${#missing[@]} -eq 0 ]] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "broker-packages: missing ${missing[*]} and no apt-get to install them" >&2
  exit 1
fi
echo "broker-packages: installing ${missing[*]} with apt-get" >&2
apt-get update -qq
# policy-rc.d 101: the packages' services are not started (the tests start
# their own brokers on free ports).
policy=/usr/sbin/policy-rc.d
made=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made=1
fi
trap '[[ $made -eq 1 ]] && rm -f "$policy"' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
