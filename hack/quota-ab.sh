#!/usr/bin/env bash
# A/B of 4 KiB PUT throughput for bucket quotas (docs/benchmarks.md):
# a build before quotas (OLD), this build on a bucket without a quota, and
# on a bucket with one. One server at a time on 127.0.0.1:19500, four
# drive directories (EC 2+2) with fsync, the three alternating in ROUNDS
# rounds of 15 s.
#   hack/quota-ab.sh /path/to/strata-before [ROUNDS]
# Needs bin/strata, bin/bench and the aws CLI (bin/venv-clients).
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 rounds=${2:-5}
export PATH=$PWD/bin/venv-clients/bin:$PATH
export STRATA_ROOT_USER=abroot STRATA_ROOT_PASSWORD=abrootsecret123
export AWS_ACCESS_KEY_ID=$STRATA_ROOT_USER AWS_SECRET_ACCESS_KEY=$STRATA_ROOT_PASSWORD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { # label binary bucket quota|none
  local d=$work/$1 pid
  mkdir -p "$d"
  "$2" server --address 127.0.0.1:19500 --admin-over-http --shutdown-delay 0s "$d"/d{1...4} >"$d.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf http://127.0.0.1:19500/strata/health/ready >/dev/null && break; sleep 0.2; done
  aws --endpoint-url http://127.0.0.1:19500 s3 mb "s3://$3" >/dev/null
  if [ "$4" = quota ]; then
    STRATA_ENDPOINT=http://127.0.0.1:19500 bin/strata admin bucket "$3" quota 1099511627776 1000000000 >/dev/null
  fi
  bin/bench run -endpoint http://127.0.0.1:19500 -bucket "$3" -op put -size 4KiB -duration 15s -concurrency 16 -pid "$pid" 2>&1 |
    grep put-4KiB | tail -1 | sed "s|^|$1 |"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$d"
}
for _ in $(seq "$rounds"); do
  run before "$old" plain none
  run after bin/strata plain none
  run after-quota bin/strata capped quota
done
