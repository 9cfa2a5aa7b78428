package main

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStatus(t *testing.T) {
	status := []byte("Name:\tminio\nVmPeak:\t 2000000 kB\nVmHWM:\t  1153024 kB\nVmRSS:\t   524288 kB\nThreads:\t42\n")
	st, err := parseProcStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if st.hwm != 1153024<<10 || st.rss != 512<<20 {
		t.Errorf("parsed %+v", st)
	}
	if _, err := parseProcStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Error("a status without memory lines parsed")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t12 MB\nVmHWM:\t12 kB\n")); err == nil {
		t.Error("an unexpected unit parsed")
	}
}

func TestParseProcStatCPU(t *testing.T) {
	// The command name may contain spaces and parentheses.
	stat := []byte("4242 (my (odd) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0")
	d, err := parseProcStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if d != 3*time.Second {
		t.Errorf("cpu = %s, want 3s (300 ticks)", d)
	}
	if _, err := parseProcStatCPU([]byte("4242 (short) S 1 2")); err == nil {
		t.Error("a truncated stat line parsed")
	}
}

func TestProcSamplerOnSelf(t *testing.T) {
	s, err := startProcSampler(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	st := s.stop()
	if st.peakRSS <= 0 {
		t.Errorf("peak RSS of this test = %d", st.peakRSS)
	}
	if _, err := startProcSampler(-1); err == nil {
		t.Error("sampling a missing process succeeded")
	}
}

func TestParseMachineCPU(t *testing.T) {
	stat := []byte("cpu  100 10 50 800 40 0 0 0 7 0\ncpu0 50 5 25 400 20 0 0 0 0 0\n")
	busy, total, err := parseMachineCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system (irq, softirq, steal are 0); idle+iowait are not.
	if busy != 1600*time.Millisecond || total != 10*time.Second {
		t.Errorf("busy %s total %s, want 1.6s of 10s", busy, total)
	}
	if _, _, err := parseMachineCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Error("a file without the cpu line parsed")
	}
}
