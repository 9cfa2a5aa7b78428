package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Bucket lifecycle on the gateway: the rules are kept with the bucket
// directory's metadata (engine/posix), and the pass (engine/lifecycle, the
// server's) runs over the files on one replica at a time: the one holding
// the lease file on the shared volume. Every action is conditional on what
// the pass listed, so a replica that runs a pass while another's lease
// lapses, or a POSIX user who rewrites a file meanwhile, loses nothing the
// rules did not mean to remove.

// leaseDir is where the lease lives: the volume's hidden directory.
const leaseDir = ".strata"

// The lease: one replica at a time runs the lifecycle pass. The file
// <root>/.strata/lifecycle.lease names its holder and when its hold ends;
// a replica takes a lapsed lease by writing its own (a new file renamed
// over the old, so readers see one or the other), then reads it back after
// a moment and runs only if it still names it. Two replicas that take it
// together both see the last writer's name.
const (
	leaseFile   = "lifecycle.lease"
	leaseSettle = time.Second
)

type lease struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// takeLease reports whether holder holds the lease in dir for hold from
// now (taking or renewing it).
func takeLease(dir, holder string, hold time.Duration, now time.Time) (bool, error) {
	path := filepath.Join(dir, leaseFile)
	if cur, err := readLease(path); err != nil {
		return false, err
	} else if cur.Holder != holder && cur.Until.After(now) {
		return false, nil
	}
	doc, err := json.Marshal(lease{Holder: holder, Until: now.Add(hold)})
	if err != nil {
		return false, err
	}
	tmp := fmt.Sprintf("%s.%s.tmp", path, strings.NewReplacer("/", "_").Replace(holder))
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, err
	}
	time.Sleep(leaseSettle)
	cur, err := readLease(path)
	return err == nil && cur.Holder == holder, err
}

func readLease(path string) (lease, error) {
	var l lease
	doc, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	if !json.Valid(doc) {
		return lease{}, nil // torn or foreign: lapsed
	}
	return l, json.Unmarshal(doc, &l)
}

// runLifecycle runs a pass every interval, on the replica holding the
// lease, until ctx ends. The lease outlasts an interval, so the replica
// that ran the last pass runs the next while it lives; a pass renews it as
// it goes and stops if another replica took it meanwhile.
func runLifecycle(ctx context.Context, pass interface {
	Run(context.Context, time.Time) error
}, leaseDir, holder string, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	hold := max(3*every, leaseMinHold)
	// Replicas started together try at different moments.
	wait := every + time.Duration(rand.Int64N(int64(every/4)+1))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = every
		held, err := takeLease(leaseDir, holder, hold, time.Now())
		if err != nil {
			log.Warn("lifecycle lease", "err", err)
			continue
		}
		if !held {
			continue
		}
		passCtx, stop := context.WithCancel(ctx)
		renewed := make(chan struct{})
		go func() {
			defer close(renewed)
			for {
				select {
				case <-passCtx.Done():
					return
				case <-time.After(hold / 3):
				}
				if held, err := takeLease(leaseDir, holder, hold, time.Now()); err == nil && !held {
					log.Warn("lifecycle lease taken by another replica: this pass stops")
					stop()
					return
				}
			}
		}()
		if err := pass.Run(passCtx, time.Now()); err != nil && passCtx.Err() == nil {
			log.Warn("lifecycle pass", "err", err)
		}
		stop()
		<-renewed
	}
}

// leaseMinHold is the shortest hold of the lease: well past the second a
// replica waits before reading its lease back.
const leaseMinHold = 30 * time.Second
