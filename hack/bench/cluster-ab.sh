#!/usr/bin/env bash
# Four strata nodes x two drives (one 4+4 set) against one node x eight
# drives (also 4+4), on loopback, both running at once and measured in
# alternating rounds so both see the same background load. Prints one line
# per round ("MODE OP SIZE roundN RATE CPU", RATE in objects/s, or MiB/s for
# 1MiB; CPU the servers' CPU time per request in µs, summed over the four
# nodes for the cluster), then the medians of each with the cluster's ratio
# to the single node, the median of the per-round CPU ratios, and each
# server's RSS at the end.
#
#   make bench-cluster                 # ROUNDS="1 2 3" DURATION=6s
#   ROUNDS="1 2 3 4 5" DURATION=8s hack/bench/cluster-ab.sh
#   WORKLOADS="get-4KiB head-4KiB" hack/bench/cluster-ab.sh   # some workloads only
#   BENCH_FLAGS="-checksums -sign-payload -full-sdk" hack/bench/cluster-ab.sh   # the SDK's defaults, not lean settings
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
# (answering servers that are not ours, left on these addresses, would pass the check above)
for pid in "${pids[@]}"; do
	kill -0 "$pid" 2>/dev/null || { echo "a server exited (address taken?); logs in $work" >&2; trap - EXIT; exit 1; }
done

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
				-op "$1" -size "$2" -duration "${DURATION:-6s}" -pid "$pid" -json "$work/run.json" ${BENCH_FLAGS:-} > "$work/run.out" 2>&1 ||
				{ cat "$work/run.out" >&2; exit 1; }
			[ -n "${SHOW_ROWS:-}" ] && tail -1 "$work/run.out"
			# objects/s (MiB/s for 1 MiB) and the servers' CPU µs per request
			python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[0]; print(round(r["mib_per_s"] if sys.argv[2]=="1MiB" else r["objects_per_s"]), round(r.get("server_cpu_per_op_us",0)))' "$work/run.json" "$2" |
				sed "s/^/$mode $1 $2 round$r /" | tee -a "$rounds"
		done
	done
done
# Two summaries of the CPU per request: the ratio of the two medians, and
# the median of each round's ratio (a cluster round against the single
# round just before it). The VM's speed drifts between rounds (one node's
# CPU per 4 KiB HEAD has ranged 127-202 us within one run), and the rounds
# alternate so that each cluster round meets the single node in the same
# state: the per-round ratio cancels the drift, the ratio of medians does not.
echo "# op size: rate single -> cluster (ratio of medians); server CPU us/op single -> cluster summed over nodes (ratio of medians); CPU ratio per round: median (range)"
python3 - "$rounds" $workloads <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for spec in sys.argv[2:]:
    op, size = spec.split("-", 1)
    runs = {m: {r[3]: (float(r[4]), float(r[5])) for r in rows if r[:3] == [m, op, size]} for m in ("single", "cluster")}
    s, c = runs["single"], runs["cluster"]
    rs, rc = st.median(v[0] for v in s.values()), st.median(v[0] for v in c.values())
    cs, cc = st.median(v[1] for v in s.values()), st.median(v[1] for v in c.values())
    per = sorted(c[k][1] / s[k][1] for k in c if k in s and s[k][1] > 0)
    print(f"{op} {size}: {rs:.0f} -> {rc:.0f} ({rc / rs:.2f}x); {cs:.0f} -> {cc:.0f} us ({cc / cs:.2f}x); "
          f"per round {st.median(per):.2f}x ({per[0]:.2f}-{per[-1]:.2f})")
PY
for i in "${!pids[@]}"; do
	echo "rss ${addrs[$i]} $(( $(ps -o rss= -p "${pids[$i]}") / 1024 )) MiB"
done
