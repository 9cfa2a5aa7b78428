package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// requestGrace bounds how long in-flight requests may outlive a workload's
// duration before they are cancelled (and counted as errors).
const requestGrace = 60 * time.Second

// Runner drives workloads against one target.
type Runner struct {
	Target  Target
	Clients []*s3.Client // one per endpoint; worker i uses Clients[i%len]
	Bucket  string
	// Procs are the server processes whose CPU and memory are sampled during
	// each measured phase (empty: none).
	Procs []int
	// payload holds random (incompressible) bytes, shared by every PUT.
	payload []byte
	// BucketEncryption, when set, is the bucket's default encryption.
	BucketEncryption string
	// Settings names the clients' settings in each result (ClientOptions.settings).
	Settings string
}

func newRunner(t Target, o ClientOptions, bucket string, maxSize int64) *Runner {
	payload := make([]byte, maxSize)
	_, _ = rand.Read(payload)
	return &Runner{
		Target:   t,
		Clients:  newS3Clients(t, o, newTransport(o.Concurrency)),
		Bucket:   bucket,
		payload:  payload,
		Settings: o.settings(),
	}
}

func (r *Runner) client(i int) *s3.Client { return r.Clients[i%len(r.Clients)] }

// ensureBucket creates the bucket unless it exists, with its default
// encryption when the target has one.
func (r *Runner) ensureBucket(ctx context.Context) error {
	if err := ensureBucket(ctx, r.client(0), r.Bucket); err != nil {
		return fmt.Errorf("creating bucket %s: %s", r.Bucket, errorCode(err))
	}
	if r.BucketEncryption == "" {
		return nil
	}
	_, err := r.client(0).PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{Bucket: aws.String(r.Bucket),
		ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{Rules: []types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryption(r.BucketEncryption)}}}}})
	if err != nil {
		return fmt.Errorf("setting the default encryption of bucket %s: %s", r.Bucket, errorCode(err))
	}
	return nil
}

// Prepare writes the objects of set under prefix, concurrency at a time.
// It is not measured.
func (r *Runner) Prepare(ctx context.Context, prefix string, set Set, concurrency int) error {
	if err := r.ensureBucket(ctx); err != nil {
		return err
	}
	n := set.Objects
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for i := range min(concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker(i, r.client(i), r.Bucket, prefix, set.Size, r.payload)
			for {
				k := int(next.Add(1)) - 1
				if k >= n || ctx.Err() != nil {
					return
				}
				if err := w.put(ctx, set.key(prefix, k)); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("preparing %s: %s", set.key(prefix, k), errorCode(err)) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// Measure runs the measured phase of p against objects under prefix (which
// Prepare must have filled when the op needs them).
func (r *Runner) Measure(ctx context.Context, p Plan, prefix string) (Result, error) {
	if err := r.ensureBucket(ctx); err != nil {
		return Result{}, err
	}
	workers := make([]*worker, p.Concurrency)
	for i := range workers {
		w := newWorker(i, r.client(i), r.Bucket, prefix, p.Size, r.payload)
		if p.Op == OpDelete || p.Op == OpMixed {
			lo, hi := workerRange(p.Prepared, p.Concurrency, i)
			for k := lo; k < hi; k++ {
				w.pool = append(w.pool, p.Set().key(prefix, k))
			}
		}
		workers[i] = w
	}

	limit := p.Duration + requestGrace
	if p.Duration <= 0 {
		limit = 30 * time.Minute // count-bound only: still never unbounded
	}
	reqCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	if p.Warmup > 0 {
		// Same requests, thrown away: fills the server's caches (and the
		// page cache, which MinIO's O_DIRECT writes bypass) so a short
		// measured phase does not mostly measure the disk.
		var unbounded atomic.Int64
		warm := p
		warm.Count = 0
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.loop(reqCtx, warm, time.Now().Add(p.Warmup), &unbounded)
				w.stats = map[Op]*opStats{}
			}()
		}
		wg.Wait()
	}

	samplers := make([]*procSampler, 0, len(r.Procs))
	for _, pid := range r.Procs {
		s, err := startProcSampler(pid)
		if err != nil {
			return Result{}, err
		}
		samplers = append(samplers, s)
	}
	cpu0 := selfCPU()
	machine0, _, machineErr := machineCPU()
	start := time.Now()
	var deadline time.Time
	if p.Duration > 0 {
		deadline = start.Add(p.Duration)
	}
	var issued atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(reqCtx, p, deadline, &issued)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	clientCPU := selfCPU() - cpu0

	machine1, _, machineErr1 := machineCPU()

	res := newResult(r.Target.Name, p, len(r.Clients), elapsed)
	res.Client = r.Settings
	res.ClientCPU = clientCPU.Seconds() / elapsed.Seconds()
	for _, s := range samplers {
		st := s.stop()
		res.ServerCPU += st.cpu.Seconds() / elapsed.Seconds()
		res.ServerPeakRSS = max(res.ServerPeakRSS, st.peakRSS)
	}
	if machineErr == nil && machineErr1 == nil && len(samplers) > 0 {
		machine := (machine1 - machine0).Seconds() / elapsed.Seconds()
		res.OtherCPU = max(machine-res.ClientCPU-res.ServerCPU, 0)
	}
	merged := map[Op]*opStats{}
	for _, w := range workers {
		for op, s := range w.stats {
			if m, ok := merged[op]; ok {
				m.merge(s)
			} else {
				merged[op] = s
			}
		}
	}
	res.fill(merged)
	if res.Ops > 0 {
		res.ServerCPUPerOp = res.ServerCPU * res.Seconds * 1e6 / float64(res.Ops)
		res.ClientCPUPerOp = res.ClientCPU * res.Seconds * 1e6 / float64(res.Ops)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// loop issues requests until the deadline passes or the shared request
// budget is spent.
func (w *worker) loop(ctx context.Context, p Plan, deadline time.Time, issued *atomic.Int64) {
	total := p.Mix.total()
	for ctx.Err() == nil {
		if !deadline.IsZero() && time.Now().After(deadline) {
			return
		}
		if p.Op == OpDelete && len(w.pool) == 0 {
			return // this worker's share is gone
		}
		if p.Count > 0 && issued.Add(1) > p.Count {
			return
		}
		op := p.Op
		if op == OpMixed {
			op = p.Mix.pick(w.rng.IntN(total))
			if op != OpPut && len(w.pool) == 0 {
				op = OpPut // nothing left to read or delete: write one
			}
		}
		w.do(ctx, op, p)
	}
}

// do runs and records one request.
func (w *worker) do(ctx context.Context, op Op, p Plan) {
	s := w.statsFor(op)
	var err error
	var ttfb time.Duration
	var listed int64
	var key string
	start := time.Now()
	switch op {
	case OpPut, OpMultipart:
		key = newKey(w.prefix, w.id, w.seq)
		w.seq++
		if op == OpPut {
			err = w.put(ctx, key)
		} else {
			err = w.multipart(ctx, key)
		}
	case OpGet:
		ttfb, err = w.get(ctx, w.readKey(p), start)
	case OpHead:
		err = w.head(ctx, w.readKey(p))
	case OpDelete:
		key = w.pool[len(w.pool)-1]
		w.pool = w.pool[:len(w.pool)-1]
		err = w.delete(ctx, key)
	case OpList:
		listed, err = w.list(ctx, p.ListPrefix, p.Delimiter)
		if err == nil && listed != int64(p.ListWant) {
			err = fmt.Errorf("LIST saw %d entries, want %d", listed, p.ListWant)
		}
	}
	lat := time.Since(start)
	if err != nil {
		if !errors.Is(err, context.Canceled) || ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	s.lat.record(lat)
	switch op {
	case OpPut, OpMultipart:
		s.bytes += w.size
		if p.Op == OpMixed {
			w.pool = append(w.pool, key)
		}
	case OpGet:
		s.bytes += w.size
		s.ttfb.record(ttfb)
	case OpList:
		s.listed += listed
	}
}

// readKey picks the object a GET or HEAD reads: any prepared object for the
// plain workloads, one of the worker's own live objects in MIXED.
func (w *worker) readKey(p Plan) string {
	if p.Op == OpMixed {
		return w.pool[w.rng.IntN(len(w.pool))]
	}
	return p.Set().key(w.prefix, w.rng.IntN(p.Prepared))
}

// selfCPU is the user+system CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
