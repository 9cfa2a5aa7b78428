package drive

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkStoreRandomIngest writes records the size of a small object's
// (2.1 KB) under keys in no order into one store with the drives' options,
// at a steady rate, then waits for its compactions: it reports the bytes
// compactions wrote for each byte applied and the process's CPU a record.
// A drive of the million-object ingest (make bench-ingest) takes a million
// such records; this is its store alone, in minutes:
//
//	go test ./engine/drive -run '^$' -bench StoreRandomIngest -benchtime 1x -timeout 30m
//	STORE_BENCH_RECORDS=1000000 ... (the default is 300,000)
func BenchmarkStoreRandomIngest(b *testing.B) {
	const writers, rate, valueSize = 8, 6000, 2100
	records := 300_000
	if v := os.Getenv("STORE_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < writers {
			b.Fatalf("STORE_BENCH_RECORDS=%q: want a count of at least %d", v, writers)
		}
		records = n
	}
	for b.Loop() {
		s, err := openStore(b.TempDir(), Options{Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		var before, after syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				val := make([]byte, valueSize)
				for i := range records / writers {
					if d := time.Until(start.Add(time.Duration(i) * writers * time.Second / rate)); d > 0 {
						time.Sleep(d)
					}
					h := fnv.New64a()
					_ = binary.Write(h, binary.BigEndian, uint64(w*records+i))
					key := objectKey("bench", fmt.Sprintf("ingest/%04d/%016x", h.Sum64()%300, h.Sum64()))
					_, _ = rand.Read(val)
					if err := s.Set(key, val, pebble.NoSync); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		// Compactions are done when none has run for 3 s.
		for idle := 0; idle < 6; {
			time.Sleep(500 * time.Millisecond)
			if s.db.Metrics().Compact.NumInProgress > 0 {
				idle = 0
			} else {
				idle++
			}
		}
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		st := s.stats()
		cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()) - time.Duration(before.Utime.Nano()+before.Stime.Nano())
		b.ReportMetric(float64(st.CompactedBytes)/float64(st.AppliedBytes), "compacted/applied")
		b.ReportMetric(float64(cpu.Microseconds())/float64(records), "cpu-µs/record")
		b.ReportMetric(float64(st.L0Sublevels), "L0-sublevels")
		if err := s.db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
