#!/usr/bin/env bash
# Four strata nodes x two drives (one 4+4 set) against one node x eight
# drives (also 4+4), on loopback, both running at once and measured in
# alternating rounds so both see the same background load. Prints one line
# per round ("MODE OP SIZE roundN RATE CPU", RATE in objects/s, or MiB/s for
# 1MiB; CPU the servers' CPU time per request in µs, summed over the four
# nodes for the cluster), then the medians of each with the cluster's ratio
# to the single node, and each server's RSS at the end.
#
#   make bench-cluster                 # ROUNDS="1 2 3" DURATION=6s
#   ROUNDS="1 2 3 4 5" DURATION=8s hack/bench/cluster-ab.sh
#   WORKLOADS="get-4KiB head-4KiB" hack/bench/cluster-ab.sh   # some workloads only
set -euo pipefail
cd "$(dirname "$0")/../.."
strata=bin/strata bench=bin/bench
work=$(mktemp -d /tmp/strata-cluster-ab.XXXXXX)
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

export STRATA_ROOT_USER=benchadmin STRATA_ROOT_PASSWORD=benchsecret123
nodes=(21 22 23 24)
eps=()
for n in "${nodes[@]}"; do
	mkdir -p "$work/n$n/d1" "$work/n$n/d2"
	eps+=("\"http://127.0.0.$n:9300$work/n$n/d{1...2}\"")
done
(IFS=,; echo "{\"version\":1,\"pools\":[{\"name\":\"pool-a\",\"endpoints\":[${eps[*]}]}]}") > "$work/topology.json"
for n in "${nodes[@]}"; do
	$strata server --address 127.0.0.$n:9300 --internode-port 9301 --topology "$work/topology.json" --insecure-internode > "$work/n$n.log" 2>&1 &
	pids+=($!)
done
mkdir -p "$work/single"
$strata server --address 127.0.0.1:9500 "$work"/single/d{1...8} > "$work/single.log" 2>&1 &
pids+=($!)

addrs=(127.0.0.21:9300 127.0.0.22:9300 127.0.0.23:9300 127.0.0.24:9300 127.0.0.1:9500)
for _ in $(seq 90); do
	up=1
	for a in "${addrs[@]}"; do curl -sf "http://$a/strata/health/cluster" > /dev/null 2>&1 || up=0; done
	[ $up = 1 ] && break
	sleep 1
done
[ $up = 1 ] || { echo "servers did not come up; logs in $work" >&2; trap - EXIT; exit 1; }

cluster_pids=$(IFS=,; echo "${pids[*]:0:4}")
single_pid=${pids[4]}
rounds="$work/rounds.txt"
cluster=http://127.0.0.21:9300,http://127.0.0.22:9300,http://127.0.0.23:9300,http://127.0.0.24:9300
single=http://127.0.0.1:9500
workloads=${WORKLOADS:-put-4KiB get-4KiB head-4KiB put-1MiB get-1MiB}
for spec in $workloads; do
	set -- ${spec/-/ }
	for r in ${ROUNDS:-1 2 3}; do
		for mode in single cluster; do
			ep=$single pid=$single_pid
			[ $mode = cluster ] && ep=$cluster pid=$cluster_pids
			$bench run -endpoint $ep -access-key "$STRATA_ROOT_USER" -secret-key "$STRATA_ROOT_PASSWORD" \
				-op "$1" -size "$2" -duration "${DURATION:-6s}" -pid "$pid" -json "$work/run.json" > "$work/run.out" 2>&1 ||
				{ cat "$work/run.out" >&2; exit 1; }
			[ -n "${SHOW_ROWS:-}" ] && tail -1 "$work/run.out"
			# objects/s (MiB/s for 1 MiB) and the servers' CPU µs per request
			python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; print(round(r["mib_per_s"] if sys.argv[2]=="1MiB" else r["objects_per_s"]), round(r.get("server_cpu_per_op_us",0)))' "$work/run.json" "$2" |
				sed "s/^/$mode $1 $2 round$r /" | tee -a "$rounds"
		done
	done
done
echo "# medians: op size, rate single -> cluster (ratio), server CPU µs/op single -> cluster summed over nodes (ratio)"
for spec in $workloads; do
	set -- ${spec/-/ }
	med() { grep "^$1 $2 $3 " "$rounds" | awk -v c="$4" '{print $c}' | tr -d , | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
	rs=$(med single "$1" "$2" 5) rc=$(med cluster "$1" "$2" 5)
	cs=$(med single "$1" "$2" 6) cc=$(med cluster "$1" "$2" 6)
	awk -v op="$1 $2" -v rs="$rs" -v rc="$rc" -v cs="$cs" -v cc="$cc" \
		'BEGIN {printf "%s: %s -> %s (%.2fx), %s -> %s µs (%.2fx)\n", op, rs, rc, (rs>0)?rc/rs:0, cs, cc, (cs>0)?cc/cs:0}'
done
for i in "${!pids[@]}"; do
	echo "rss ${addrs[$i]} $(( $(ps -o rss= -p "${pids[$i]}") / 1024 )) MiB"
done
