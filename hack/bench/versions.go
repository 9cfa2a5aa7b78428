package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// VersionsResult is what `bench versions` measured: PUTs of one key of a
// versioned bucket, the rate of the first window of them against the last.
type VersionsResult struct {
	Target      string  `json:"target"`
	Version     string  `json:"version"`
	Versions    int     `json:"versions"`
	Window      int     `json:"window"`
	Size        int64   `json:"size"`
	Concurrency int     `json:"concurrency"`
	FirstPerSec float64 `json:"firstPerSec"`
	LastPerSec  float64 `json:"lastPerSec"`
	Ratio       float64 `json:"ratio"`
	// GetLatestPerSec and GetOldestPerSec: GETs of the newest version and
	// of the first one written, once every version is there.
	GetLatestPerSec float64 `json:"getLatestPerSec"`
	GetOldestPerSec float64 `json:"getOldestPerSec"`
	Failed          int64   `json:"failed"`
	Started         string  `json:"started"`
	Commit          string  `json:"commit"`
}

// cmdVersions runs `bench versions`: a strata server of its own (or an
// endpoint), a versioned bucket, and -versions PUTs of one key from
// -concurrency writers, timed as they complete.
func cmdVersions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("versions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin         = fs.String("strata", "", "strata binary to start (4 drive directories, 2+2)")
		versions    = fs.Int("versions", 10000, "versions of the key to write")
		window      = fs.Int("window", 1000, "PUTs timed at the start and at the end")
		size        = fs.String("size", "4KiB", "object size")
		concurrency = fs.Int("concurrency", 4, "writers of the key")
		gets        = fs.Int("gets", 500, "GETs of the newest and of the oldest version afterwards")
		out         = fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *versions < 2**window {
		return fmt.Errorf("versions: -strata is required and -versions must be at least twice -window")
	}
	n, err := parseSize(*size)
	if err != nil {
		return err
	}
	kind := strataServerKind(*bin, nil)
	p, err := startScratch(ctx, kind, "", "")
	if err != nil {
		return err
	}
	defer p.close()
	c := newS3Clients(p.target(), ClientOptions{Concurrency: *concurrency}, newTransport(*concurrency))[0]
	const bucket, key = "bench-versions", "one-key"
	if err := ensureBucket(ctx, c, bucket); err != nil {
		return err
	}
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		return err
	}
	res := VersionsResult{Target: kind.description, Version: binaryVersion(kind), Versions: *versions, Window: *window, Size: n,
		Concurrency: *concurrency, Started: time.Now().UTC().Format(time.RFC3339), Commit: gitCommit()}
	body := bytes.Repeat([]byte{'v'}, int(n))
	done := make([]time.Time, *versions) // when the i-th PUT to complete did
	var next, completed, failed atomic.Int64
	var first sync.Once
	var oldest string
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *concurrency; w++ {
		wg.Go(func() {
			for next.Add(1) <= int64(*versions) && ctx.Err() == nil {
				out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
				if err != nil {
					failed.Add(1)
					continue
				}
				first.Do(func() { oldest = aws.ToString(out.VersionId) })
				done[completed.Add(1)-1] = time.Now()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	got := int(completed.Load())
	res.Failed = failed.Load()
	if got < 2**window {
		return fmt.Errorf("versions: only %d PUTs succeeded (%d failed)", got, res.Failed)
	}
	res.FirstPerSec = float64(*window) / done[*window-1].Sub(start).Seconds()
	res.LastPerSec = float64(*window) / done[got-1].Sub(done[got-1-*window]).Seconds()
	res.Ratio = res.LastPerSec / res.FirstPerSec
	for i, vid := range []string{"", oldest} {
		t0 := time.Now()
		for j := 0; j < *gets; j++ {
			in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
			if vid != "" {
				in.VersionId = aws.String(vid)
			}
			o, err := c.GetObject(ctx, in)
			if err != nil {
				res.Failed++
				continue
			}
			_, _ = io.Copy(io.Discard, o.Body)
			o.Body.Close()
		}
		rate := float64(*gets) / time.Since(t0).Seconds()
		if i == 0 {
			res.GetLatestPerSec = rate
		} else {
			res.GetOldestPerSec = rate
		}
	}
	fmt.Fprintf(stderr, "%s (%s): %d versions of one key, %d writers: first %d PUTs %.0f/s, last %d %.0f/s (%.2fx); GET newest %.0f/s, oldest %.0f/s; %d failed\n",
		res.Target, res.Version, got, *concurrency, *window, res.FirstPerSec, *window, res.LastPerSec, res.Ratio,
		res.GetLatestPerSec, res.GetOldestPerSec, res.Failed)
	return writeJSONFile(*out, res, stdout)
}
