package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/engine/metrics"
	"github.com/strata-storage/strata/engine/notify"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Service is a process's replication as the admin API and the metrics
// read it: its remotes (opened with the notification targets), the
// queue's backlog for each, the buckets' configurations, and the front
// end's resync.
type Service struct {
	Remotes *Remotes
	// Backlog is a remote's undelivered changes (the notifications'
	// queue's count).
	Backlog func(arn string) notify.TargetBacklog
	// Buckets lists the buckets (their configurations).
	Buckets func(ctx context.Context) ([]objlayer.BucketInfo, error)
	// Resync queues a bucket's versions not yet replicated; it returns
	// how many it queued of how many versions it read.
	Resync func(ctx context.Context, bucket string) (queued, versions int64, err error)
}

// ErrNoRemotes is a resync asked of a process without remotes.
var ErrNoRemotes = errors.New("replication: this server has no replication remotes (targets of type s3)")

// Metrics is the replication's state for metrics.RegisterReplication.
func (s *Service) Metrics() metrics.Replication {
	var m metrics.Replication
	if s == nil || s.Remotes == nil {
		return m
	}
	for _, r := range s.Remotes.All() {
		b := s.backlog(r.arn)
		m.Remotes = append(m.Remotes, metrics.ReplicationRemote{ARN: r.arn, Backlog: b.Events, Oldest: b.Oldest})
	}
	for name, b := range s.Remotes.Stats.Snapshot() {
		m.Buckets = append(m.Buckets, metrics.ReplicationBucket{Bucket: name, Replicated: b.Replicated, Failed: b.Failed,
			Retried: b.Retried, Bytes: b.Bytes})
	}
	return m
}

func (s *Service) backlog(arn string) notify.TargetBacklog {
	if s.Backlog == nil {
		return notify.TargetBacklog{}
	}
	return s.Backlog(arn)
}

// Status is the admin API's replication status.
func (s *Service) Status(ctx context.Context) (adminapi.ReplicationStatus, error) {
	st := adminapi.ReplicationStatus{Remotes: []adminapi.ReplicationRemote{}, Buckets: []adminapi.BucketReplication{}}
	if s == nil || s.Remotes == nil {
		return st, nil
	}
	for _, r := range s.Remotes.All() {
		b := s.backlog(r.arn)
		rm := adminapi.ReplicationRemote{ARN: r.arn, Endpoint: r.endpoint.String(), Backlog: b.Events}
		if !b.Oldest.IsZero() {
			rm.OldestSeconds = time.Since(b.Oldest).Seconds()
		}
		st.Remotes = append(st.Remotes, rm)
	}
	buckets, err := s.Buckets(ctx)
	if err != nil {
		return st, err
	}
	counters := s.Remotes.Stats.Snapshot()
	for _, bk := range buckets {
		cfg := Cached(bk.Replication)
		if cfg == nil {
			continue
		}
		c := counters[bk.Name]
		br := adminapi.BucketReplication{Bucket: bk.Name, Role: cfg.Role, Replicated: c.Replicated, Failed: c.Failed,
			Retried: c.Retried, Bytes: c.Bytes, LastLagSeconds: c.LastLag.Seconds()}
		if !c.LastAt.IsZero() {
			at := c.LastAt.UTC()
			br.LastAt = &at
		}
		for _, r := range cfg.Rules {
			state := "Disabled"
			if r.Enabled {
				state = "Enabled"
			}
			var what []string
			if r.DeleteMarkers {
				what = append(what, "delete markers")
			}
			if r.Deletes {
				what = append(what, "version deletes")
			}
			line := fmt.Sprintf("%s: %q -> %s (%s", r.ID, r.Prefix, r.Bucket, state)
			if len(what) > 0 {
				line += ", with " + strings.Join(what, " and ")
			}
			br.Rules = append(br.Rules, line+")")
		}
		st.Buckets = append(st.Buckets, br)
	}
	slices.SortFunc(st.Buckets, func(a, b adminapi.BucketReplication) int { return strings.Compare(a.Bucket, b.Bucket) })
	return st, nil
}

// ResyncBucket queues bucket's versions not yet replicated.
func (s *Service) ResyncBucket(ctx context.Context, bucket string) (adminapi.ResyncResult, error) {
	if s == nil || s.Remotes == nil || len(s.Remotes.All()) == 0 || s.Resync == nil {
		return adminapi.ResyncResult{}, ErrNoRemotes
	}
	queued, versions, err := s.Resync(ctx, bucket)
	return adminapi.ResyncResult{Bucket: bucket, Queued: queued, Versions: versions}, err
}

// Front is what a Service needs of the S3 front end.
type Front interface {
	ReplicationSource() Source
	ResyncReplication(ctx context.Context, bucket string) (queued, versions int64, err error)
}

// Start binds remotes (nil: none) to the front end, and returns the
// process's replication service, its metrics registered with reg.
func Start(front Front, layer objlayer.Layer, queue *notify.Queue, remotes *Remotes, reg prometheus.Registerer) *Service {
	s := &Service{Remotes: remotes, Buckets: layer.ListBuckets, Resync: front.ResyncReplication}
	if remotes == nil {
		return s
	}
	if queue != nil {
		s.Backlog = queue.Backlog
	}
	// Before Bind: deliveries read it from then on.
	remotes.Stats.ObserveLag = metrics.RegisterReplication(reg, s.Metrics)
	remotes.Bind(front.ReplicationSource())
	return s
}
