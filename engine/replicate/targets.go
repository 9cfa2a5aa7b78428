package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
)

// TargetsReadEvery is how often the targets file is read again.
const TargetsReadEvery = 2 * time.Second

// Targets are a process's bucket notification targets and replication
// remotes as its targets file ($STRATA_NOTIFY_TARGETS_FILE) lists them,
// read again while the process runs (StartQueue): the operator's Secret,
// mounted in the pods, is updated in place by the kubelet, so a Tenant's
// targets and remotes change without restarting its servers.
//
// An entry unchanged, with the CA file it names, keeps the target it
// opened; an entry added or changed is opened; the target of an entry
// removed or changed is closed by the queue once no delivery uses it
// (notify.Queue.SetTargets). A file that cannot be read or parsed, or an
// entry that cannot be opened, changes nothing: the targets in force
// stay, and the error is logged and counted. The operator writes the
// file even for a Tenant without targets (an empty list), so a file
// missing is not a removal: at start the queue holds every event until
// there is one (notify.Queue.HoldUntilTargets), and a file gone after
// one was read is refused like a broken one.
type Targets struct {
	Remotes      *Remotes
	path, region string
	log          *slog.Logger
	// Only loadTargets and then watch's goroutine use these: the sum of
	// the file and its CA files as last read, and the targets opened for
	// it by each entry's fingerprint (the entry and its CA); missing: no
	// file was read yet; refused the sum of the last file refused for a
	// target it could not open, refusal why (not opened again every read).
	sum     [sha256.Size]byte
	open    map[string]notify.Target
	missing bool
	refused [sha256.Size]byte
	refusal error
	failed  string
	// count is the targets in force, errors the reads refused.
	count, errors atomic.Int64
}

// QueueOptions are what StartQueue needs besides the object layer.
type QueueOptions struct {
	// Path is the targets file; Node names this process among its
	// tenant's, stable across restarts (notify.NewQueue).
	Path, Node string
	// UnknownGrace, when set, replaces the queue's (tests).
	UnknownGrace time.Duration
	// Configure, when set, sets more of the queue before it runs.
	Configure func(*notify.Queue)
}

// StartQueue opens the targets file's notification targets and
// replication remotes, and runs the durable queue over layer delivering
// to them until ctx ends, the file read again as it changes (Targets).
// The queue's metrics and the targets' are registered with reg.
func StartQueue(ctx context.Context, layer objlayer.Layer, o QueueOptions, reg prometheus.Registerer, log *slog.Logger) (*notify.Queue, *Remotes, error) {
	ts, list, err := loadTargets(o.Path, notify.DefaultRegion, log)
	if err != nil {
		return nil, nil, err
	}
	q := notify.NewQueue(layer, o.Node, list, log)
	q.OnDrop = ts.Remotes.DroppedByQueue
	if o.UnknownGrace > 0 {
		q.UnknownGrace = o.UnknownGrace
	}
	if o.Configure != nil {
		o.Configure(q)
	}
	if ts.missing { // no file yet: not knowing a target is not its removal
		q.HoldUntilTargets()
	}
	go ts.watch(ctx, q)
	go q.Run(ctx)
	metrics.RegisterNotifications(reg, ts.metrics(q))
	return q, ts.Remotes, nil
}

// StopQueue ends the context StartQueue was given (stop) and waits for
// the queue to end: what its lanes delivered leaves the store, and none
// of them uses the object layer after, so it goes before the drives
// close.
func StopQueue(stop context.CancelFunc, q *notify.Queue, log *slog.Logger) {
	stop()
	if !q.Wait(15 * time.Second) {
		log.Warn("notifications: the queue did not stop in time; the object layer closes under it")
	}
}

// loadTargets reads the targets file at path and opens its targets: the
// list for notify.NewQueue, the replication remotes among them in
// Remotes.
func loadTargets(path, region string, log *slog.Logger) (*Targets, []notify.Target, error) {
	if path == "" {
		return nil, nil, errors.New("notification targets: no targets file named")
	}
	ts := &Targets{Remotes: NewRemotes(region, log), path: path, region: region, log: log}
	list, _, err := ts.read()
	if err != nil {
		return nil, nil, err
	}
	return ts, list, nil
}

// read reads the file and opens what changed; changed is false (and list
// nil) when neither the file nor a CA file it names changed since the
// last read.
func (ts *Targets) read() (list []notify.Target, changed bool, err error) {
	specs, raw, err := notify.ReadTargetsFile(ts.path, ts.region)
	switch {
	case errors.Is(err, fs.ErrNotExist) && ts.open == nil:
		ts.open, ts.missing = map[string]notify.Target{}, true
		ts.log.Warn("bucket notifications: no targets file yet; events wait for their targets until there is one", "file", ts.path)
		return nil, true, nil
	case errors.Is(err, fs.ErrNotExist) && ts.missing:
		return nil, false, errStillMissing
	case err != nil:
		return nil, false, err
	}
	h := sha256.New()
	h.Write(raw)
	prints := make([]string, len(specs))
	for i, s := range specs {
		fp, _ := json.Marshal(s)
		if s.CAFile != "" {
			ca, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, false, fmt.Errorf("notification targets %s: target %s: %w", ts.path, s.ID, err)
			}
			h.Write(ca)
			fp = append(fp, ca...)
		}
		prints[i] = string(fp)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	switch {
	case ts.open != nil && !ts.missing && sum == ts.sum:
		return nil, false, nil
	case ts.refusal != nil && sum == ts.refused:
		return nil, false, ts.refusal
	}
	open := make(map[string]notify.Target, len(specs))
	var opened []notify.Target
	var remotes []*Remote
	for i, s := range specs {
		t := ts.open[prints[i]]
		if t == nil {
			if t, err = ts.openOne(s); err != nil {
				for _, o := range opened {
					o.Close()
				}
				ts.refused, ts.refusal = sum, fmt.Errorf("notification targets %s: %w", ts.path, err)
				return nil, false, ts.refusal
			}
			opened = append(opened, t)
		}
		open[prints[i]] = t
		list = append(list, t)
		if r, ok := t.(*Remote); ok {
			remotes = append(remotes, r)
		}
	}
	ts.open, ts.sum, ts.missing, ts.refusal = open, sum, false, nil
	ts.Remotes.set(remotes)
	ts.count.Store(int64(len(list)))
	ts.log.Info("bucket notifications", "targets", notify.ARNs(list))
	return list, true, nil
}

// errStillMissing is a read finding no file yet (counted, as the targets
// are not in force).
var errStillMissing = errors.New("notification targets: no targets file yet; events wait for their targets")

func (ts *Targets) openOne(s notify.TargetSpec) (notify.Target, error) {
	if s.Type == notifytargets.S3 {
		return ts.Remotes.Open(s)
	}
	return notify.OpenTarget(s, ts.region)
}

// watch reads the file again every TargetsReadEvery until ctx ends and
// hands q what changed.
func (ts *Targets) watch(ctx context.Context, q *notify.Queue) {
	t := time.NewTicker(TargetsReadEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, changed, err := ts.read()
		if err != nil {
			ts.errors.Add(1)
			if msg := err.Error(); msg != ts.failed { // once, not every read
				ts.failed = msg
				ts.log.Error("bucket notifications: the targets file was read again and refused; the targets in force stay", "error", err)
			}
			continue
		}
		ts.failed = ""
		if changed {
			q.SetTargets(list)
		}
	}
}

// metrics adds the targets in force and the refused reads to q's counters
// (metrics.RegisterNotifications).
func (ts *Targets) metrics(q *notify.Queue) func() metrics.Notifications {
	return func() metrics.Notifications {
		n := q.Snapshot()
		n.Targets, n.TargetsFileErrors = int(ts.count.Load()), ts.errors.Load()
		return n
	}
}
