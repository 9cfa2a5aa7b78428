package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeS3 is just enough of S3, in memory, to drive the runner without a
// real server: bucket create, object PUT/GET/HEAD/DELETE, ListObjectsV2.
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte // "bucket/key"
}

type fakeListResult struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	IsTruncated           bool
	NextContinuationToken string `xml:",omitempty"`
	KeyCount              int
	Contents              []struct{ Key string }
	CommonPrefixes        []struct{ Prefix string }
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case key == "" && r.Method == http.MethodPut:
	case key == "" && r.Method == http.MethodGet:
		f.list(w, r, bucket)
	case r.Method == http.MethodPut:
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.objects[bucket+"/"+key] = b
		w.Header().Set("ETag", `"0"`)
	case r.Method == http.MethodDelete:
		delete(f.objects, bucket+"/"+key)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		b, ok := f.objects[bucket+"/"+key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

func (f *fakeS3) list(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, delimiter := q.Get("prefix"), q.Get("delimiter")
	var keys []string
	for k := range f.objects {
		if key, ok := strings.CutPrefix(k, bucket+"/"); ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	// Entries in order: keys, and each common prefix once in place of its keys.
	type entry struct {
		name     string
		isPrefix bool
	}
	var entries []entry
	for _, k := range keys {
		if i := strings.Index(k[len(prefix):], delimiter); delimiter != "" && i >= 0 {
			cp := k[:len(prefix)+i+len(delimiter)]
			if n := len(entries); n == 0 || entries[n-1].name != cp {
				entries = append(entries, entry{cp, true})
			}
			continue
		}
		entries = append(entries, entry{k, false})
	}
	start, _ := strconv.Atoi(q.Get("continuation-token"))
	maxKeys, _ := strconv.Atoi(q.Get("max-keys"))
	end := min(start+maxKeys, len(entries))
	var res fakeListResult
	for _, e := range entries[start:end] {
		if e.isPrefix {
			res.CommonPrefixes = append(res.CommonPrefixes, struct{ Prefix string }{e.name})
		} else {
			res.Contents = append(res.Contents, struct{ Key string }{e.name})
		}
	}
	res.KeyCount = end - start
	if end < len(entries) {
		res.IsTruncated, res.NextContinuationToken = true, strconv.Itoa(end)
	}
	w.Header().Set("Content-Type", "application/xml")
	_ = xml.NewEncoder(w).Encode(res)
}

func (f *fakeS3) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k := range f.objects {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// TestRunnerAgainstFakeS3 drives every workload, count-bounded, through the
// real SDK against the in-memory server and checks what a report would say.
func TestRunnerAgainstFakeS3(t *testing.T) {
	fake := &fakeS3{objects: map[string][]byte{}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	// Two endpoints on one server exercise the replica spreading.
	target := Target{Name: "fake", Endpoints: []string{srv.URL, srv.URL}, AccessKey: "a", SecretKey: "b"}
	r := newRunner(target, ClientOptions{Concurrency: 4}, "bench", 64<<10)
	r.Procs = nil
	ctx := context.Background()

	runWith := func(w Workload) Result {
		t.Helper()
		w.Concurrency, w.Duration, w.Warmup, w.Mix = 4, time.Minute, 10*time.Millisecond, defaultMix
		p, err := plan(w)
		if err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf("t-%s-%d", p.Name(), p.Dirs) // a set of its own per layout
		if p.Prepared > 0 {
			if err := r.Prepare(ctx, prefix, p.Set(), p.Concurrency); err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.Measure(ctx, p, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 {
			t.Fatalf("%s: %d errors, first: %s", p.Name(), res.Errors, res.FirstError)
		}
		if res.Endpoints != 2 || res.Concurrency != 4 {
			t.Errorf("%s: endpoints %d, concurrency %d", p.Name(), res.Endpoints, res.Concurrency)
		}
		return res
	}
	run := func(op Op, size int64, objects int, count int64) Result {
		t.Helper()
		return runWith(Workload{Op: op, Size: size, Objects: objects, Count: count})
	}

	if res := run(OpPut, 4096, 0, 40); res.Ops != 40 || res.Bytes != 40*4096 {
		t.Errorf("put: %d ops, %d bytes; want 40, %d", res.Ops, res.Bytes, 40*4096)
	}
	if n := fake.count("bench/t-put-4KiB-16/"); n != 40 {
		t.Errorf("put wrote %d objects, want 40", n)
	}
	res := run(OpGet, 64<<10, 16, 30)
	if res.Ops != 30 || res.TTFB == nil || res.TTFB.Count != 30 {
		t.Errorf("get: %d ops, ttfb %+v", res.Ops, res.TTFB)
	}
	if res := run(OpHead, 4096, 16, 30); res.Ops != 30 || res.Bytes != 0 {
		t.Errorf("head: %d ops, %d bytes", res.Ops, res.Bytes)
	}
	if res := run(OpList, 4096, 1500, 3); res.Ops != 3 || res.ListedPerSec <= 0 {
		t.Errorf("list: %d ops, %v listed/s", res.Ops, res.ListedPerSec)
	}
	// 1500 objects over 40 directories: the top level lists 40 common
	// prefixes, directory 20 holds objects 20, 60, ... 1460 (37 of them);
	// an entry missing from a listing would be an error.
	for shape, want := range map[ListShape]int64{ListAll: 1500, ListTop: 40, ListDir: 37} {
		res := runWith(Workload{Op: OpList, Size: 4096, Objects: 1500, Dirs: 40, List: shape, Count: 2})
		if listed := int64(math.Round(res.ListedPerSec * res.Seconds)); res.Ops != 2 || listed != 2*want {
			t.Errorf("list %q: %d ops, %d entries, want 2 listings of %d", shape, res.Ops, listed, want)
		}
	}
	if res := run(OpDelete, 4096, 20, 0); res.Ops != 20 {
		t.Errorf("delete: %d ops, want the 20 prepared", res.Ops)
	}
	if n := fake.count("bench/t-delete-4KiB-16/"); n != 0 {
		t.Errorf("%d objects survived DELETE", n)
	}
	res = run(OpMixed, 4096, 16, 200)
	if res.Ops != 200 || len(res.Breakdown) == 0 {
		t.Errorf("mixed: %d ops, breakdown %+v", res.Ops, res.Breakdown)
	}
}
