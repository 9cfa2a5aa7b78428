package main

// `strata admin` is the day-2 command line: it reads and acts on a running
// tenant through the admin API, signed with the root credentials (SigV4,
// engine/admin), never by passing the keys around in curl commands.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/adminclient"
	"github.com/strata-storage/strata/engine/iam"
)

const adminUsage = `usage: strata admin [flags] <command> [args]
commands:
  info                        the deployment: version, pools, capacity
  drives                      every drive with its pool, set, state and usage
  heal                        healing and integrity-scan progress
  heal start                  start an integrity scan now
  users                       users besides root, their policies and buckets
  decommission POOL           a pool's decommission progress
  decommission POOL start     start draining the pool onto the others
  decommission POOL cancel    stop draining it
  bucket BUCKET               a bucket's usage and quota
  bucket BUCKET quota B O     set its hard quota: B bytes, O objects (0: no limit; both 0: none)
  replication                 replication remotes' backlogs, each bucket's rules and counters (this node's)
  replication resync BUCKET   queue the bucket's versions not yet replicated
flags:
  --endpoint URL   the tenant's S3 endpoint (env STRATA_ENDPOINT), e.g. https://localhost:19000
  --ca-file FILE   CA certificate that verifies it (env STRATA_CA_FILE)
  --json           print the API's JSON instead of a table
  --timeout D      per call (default 10s)
Root credentials come from STRATA_ROOT_USER and STRATA_ROOT_PASSWORD (or
their _FILE variants), as for the server: read them from the tenant's root
Secret (docs/install.md).
`

func runAdmin(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("strata admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	endpoint := fs.String("endpoint", getenv("STRATA_ENDPOINT"), "S3 endpoint of the tenant")
	caFile := fs.String("ca-file", getenv("STRATA_CA_FILE"), "CA certificate (PEM)")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "per call")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *endpoint == "" {
		fmt.Fprint(stderr, adminUsage)
		if *endpoint == "" && fs.NArg() > 0 {
			fmt.Fprintln(stderr, "\nstrata admin: --endpoint (or STRATA_ENDPOINT) is required")
		}
		return 2
	}
	root, err := iam.RootFromEnv(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "strata admin:", err)
		return 2
	}
	opts := adminclient.Options{AccessKey: root.AccessKey, SecretKey: root.SecretKey, Timeout: *timeout}
	if *caFile != "" {
		if opts.CA, err = os.ReadFile(*caFile); err != nil {
			fmt.Fprintln(stderr, "strata admin:", err)
			return 2
		}
	}
	c, err := adminclient.New(*endpoint, opts)
	if err != nil {
		fmt.Fprintln(stderr, "strata admin:", err)
		return 2
	}
	defer c.Close()
	a := adminCmd{c: c, out: stdout, json: *asJSON}
	ctx, cancel := context.WithTimeout(context.Background(), 2**timeout)
	defer cancel()
	if err := a.run(ctx, fs.Args()); err != nil {
		var usage usageError
		if errors.As(err, &usage) {
			fmt.Fprintf(stderr, "strata admin: %v\n\n%s", err, adminUsage)
			return 2
		}
		fmt.Fprintln(stderr, "strata admin:", err)
		return 1
	}
	return 0
}

type usageError string

func (e usageError) Error() string { return string(e) }

type adminCmd struct {
	c    *adminclient.Client
	out  io.Writer
	json bool
}

func (a adminCmd) run(ctx context.Context, args []string) error {
	switch {
	case len(args) == 1 && args[0] == "info":
		return a.info(ctx)
	case len(args) == 1 && args[0] == "drives":
		return a.drives(ctx)
	case len(args) == 1 && args[0] == "heal":
		return a.heal(ctx)
	case len(args) == 2 && args[0] == "heal" && args[1] == "start":
		if err := a.c.StartScan(ctx); err != nil {
			return err
		}
		return a.say("integrity scan started")
	case len(args) == 1 && args[0] == "users":
		return a.users(ctx)
	case len(args) == 2 && args[0] == "decommission":
		return a.decommission(ctx, args[1])
	case len(args) == 3 && args[0] == "decommission" && args[2] == "start":
		if err := a.c.StartDecommission(ctx, args[1]); err != nil {
			return err
		}
		return a.say("decommission of pool " + args[1] + " started")
	case len(args) == 3 && args[0] == "decommission" && args[2] == "cancel":
		if err := a.c.CancelDecommission(ctx, args[1]); err != nil {
			return err
		}
		return a.say("decommission of pool " + args[1] + " cancelled")
	case len(args) == 2 && args[0] == "bucket":
		return a.bucket(ctx, args[1])
	case len(args) == 1 && args[0] == "replication":
		return a.replication(ctx)
	case len(args) == 3 && args[0] == "replication" && args[1] == "resync":
		res, err := a.c.ResyncReplication(ctx, args[2])
		if err != nil {
			return err
		}
		if a.json {
			return a.emit(res)
		}
		return a.say(fmt.Sprintf("bucket %s: %d of %d versions queued for replication", res.Bucket, res.Queued, res.Versions))
	case len(args) == 5 && args[0] == "bucket" && args[2] == "quota":
		var q adminapi.Quota
		for i, v := range []*int64{&q.Bytes, &q.Objects} {
			n, err := strconv.ParseInt(args[3+i], 10, 64)
			if err != nil || n < 0 {
				return usageError(fmt.Sprintf("quota %q: not a non-negative integer", args[3+i]))
			}
			*v = n
		}
		if err := a.c.SetBucketQuota(ctx, args[1], q); err != nil {
			return err
		}
		return a.bucket(ctx, args[1])
	}
	return usageError(fmt.Sprintf("unknown command %q", strings.Join(args, " ")))
}

func (a adminCmd) say(msg string) error {
	if a.json {
		return a.emit(map[string]string{"status": msg})
	}
	_, err := fmt.Fprintln(a.out, msg)
	return err
}

func (a adminCmd) emit(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (a adminCmd) table(header string, rows [][]string) error {
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func (a adminCmd) info(ctx context.Context) error {
	info, err := a.c.Info(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(info)
	}
	fmt.Fprintf(a.out, "version %s, protocol %d, mode %s, up %s, deployment %s\n",
		info.Version, info.ProtocolVersion, info.Mode, info.Uptime, info.DeploymentID)
	c := info.Capacity
	fmt.Fprintf(a.out, "capacity: %s usable, %s used of %s raw, %s free\n",
		bytesIEC(c.UsableBytes), bytesIEC(c.UsedBytes), bytesIEC(c.TotalBytes), bytesIEC(c.FreeBytes))
	var rows [][]string
	for _, p := range info.Pools {
		online := 0
		for _, d := range p.Drives {
			if d.State == "online" {
				online++
			}
		}
		rows = append(rows, []string{p.Name, p.State, fmt.Sprint(p.Sets), fmt.Sprintf("%d+%d", p.SetSize-p.Parity, p.Parity),
			fmt.Sprintf("%d/%d", online, len(p.Drives))})
	}
	return a.table("POOL\tSTATE\tSETS\tDATA+PARITY\tDRIVES ONLINE", rows)
}

func (a adminCmd) drives(ctx context.Context) error {
	info, err := a.c.Info(ctx)
	if err != nil {
		return err
	}
	if a.json {
		var all []any
		for _, p := range info.Pools {
			for _, d := range p.Drives {
				all = append(all, map[string]any{"pool": p.Name, "drive": d})
			}
		}
		return a.emit(all)
	}
	var rows [][]string
	for _, p := range info.Pools {
		for _, d := range p.Drives {
			rows = append(rows, []string{p.Name, fmt.Sprint(d.Set), fmt.Sprint(d.Index), d.Endpoint, d.State,
				bytesIEC(d.UsedBytes), bytesIEC(d.TotalBytes)})
		}
	}
	return a.table("POOL\tSET\tINDEX\tENDPOINT\tSTATE\tUSED\tTOTAL", rows)
}

func (a adminCmd) heal(ctx context.Context) error {
	st, err := a.c.Heal(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(st)
	}
	last := "never"
	if st.LastScanEnd != nil {
		last = st.LastScanEnd.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(a.out, "queue %d (deferred %d), healed %d objects / %d shards / %s, failed %d, dangling purged %d\n",
		st.QueueLength, st.Deferred, st.ObjectsHealed, st.ShardsHealed, bytesIEC(uint64(max(st.BytesHealed, 0))), st.Failed, st.Purged)
	fmt.Fprintf(a.out, "scanner: %d cycles, %d objects verified, scanning now %v, last complete scan %s\n",
		st.ScanCycles, st.ScanObjects, st.Scanning, last)
	if len(st.Drives) == 0 {
		return nil
	}
	var rows [][]string
	for _, d := range st.Drives {
		state := "rebuilding"
		if d.Done {
			state = "done"
		}
		if d.Error != "" {
			state = "error: " + d.Error
		}
		rows = append(rows, []string{fmt.Sprint(d.Set), fmt.Sprint(d.Index), d.Started.UTC().Format(time.RFC3339), fmt.Sprint(d.Objects), state})
	}
	return a.table("SET\tINDEX\tSTARTED\tOBJECTS\tSTATE", rows)
}

func (a adminCmd) users(ctx context.Context) error {
	users, err := a.c.Users(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(users)
	}
	var rows [][]string
	for _, u := range users {
		buckets := strings.Join(u.Buckets, ",")
		if buckets == "" {
			buckets = "*"
		}
		rows = append(rows, []string{u.AccessKey, u.Policy, buckets})
	}
	return a.table("ACCESS KEY\tPOLICY\tBUCKETS", rows)
}

func (a adminCmd) decommission(ctx context.Context, pool string) error {
	st, err := a.c.Decommission(ctx, pool)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(st)
	}
	fmt.Fprintf(a.out, "pool %s: %s (done %v), %d objects / %s moved\n", st.Pool, st.State, st.Done, st.ObjectsMoved, bytesIEC(uint64(max(st.BytesMoved, 0))))
	var rows [][]string
	for _, s := range st.Sets {
		rows = append(rows, []string{fmt.Sprint(s.Set), s.Node, fmt.Sprint(s.Objects), bytesIEC(uint64(max(s.Bytes, 0))), fmt.Sprint(s.Done), s.Error})
	}
	if len(rows) == 0 {
		return nil
	}
	return a.table("SET\tNODE\tOBJECTS\tBYTES\tDONE\tERROR", rows)
}

func (a adminCmd) bucket(ctx context.Context, bucket string) error {
	u, err := a.c.BucketUsage(ctx, bucket)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(u)
	}
	quota := func(limit int64, show func(int64) string) string {
		if u.Quota == nil || limit == 0 {
			return "no limit"
		}
		return show(limit)
	}
	var qb, qo int64
	if u.Quota != nil {
		qb, qo = u.Quota.Bytes, u.Quota.Objects
	}
	iec := func(n int64) string { return bytesIEC(uint64(max(n, 0))) }
	return a.table("BUCKET\tBYTES\tQUOTA BYTES\tOBJECTS\tQUOTA OBJECTS", [][]string{{
		u.Bucket, iec(u.Bytes), quota(qb, iec), fmt.Sprint(u.Objects), quota(qo, func(n int64) string { return fmt.Sprint(n) })}})
}

// bytesIEC prints a byte count in binary units.
func bytesIEC(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (a adminCmd) replication(ctx context.Context) error {
	st, err := a.c.Replication(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.emit(st)
	}
	var rows [][]string
	for _, r := range st.Remotes {
		rows = append(rows, []string{r.ARN, r.Endpoint, fmt.Sprint(r.Backlog), fmt.Sprintf("%.1fs", r.OldestSeconds)})
	}
	if err := a.table("REMOTE\tENDPOINT\tBACKLOG\tOLDEST", rows); err != nil {
		return err
	}
	fmt.Fprintln(a.out)
	rows = nil
	for _, b := range st.Buckets {
		rows = append(rows, []string{b.Bucket, b.Role, fmt.Sprint(b.Replicated), fmt.Sprint(b.Failed), fmt.Sprint(b.Retried),
			bytesIEC(uint64(max(b.Bytes, 0))), fmt.Sprintf("%.3fs", b.LastLagSeconds), strings.Join(b.Rules, "; ")})
	}
	return a.table("BUCKET\tREMOTE\tREPLICATED\tFAILED\tRETRIED\tBYTES\tLAST LAG\tRULES", rows)
}
