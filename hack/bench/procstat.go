package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kernel reports process CPU time in USER_HZ ticks, 100 per second on
// every Linux we run on (the value is fixed in the ABI, unlike CONFIG_HZ).
const userHZ = 100

const rssSampleInterval = 100 * time.Millisecond

// procSampler watches one process during a measured phase: its peak resident
// set size and the CPU time it used.
type procSampler struct {
	pid     int
	cpu0    time.Duration
	stopCh  chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	peakRSS int64
}

type procStats struct {
	peakRSS int64 // bytes
	cpu     time.Duration
}

// startProcSampler resets the kernel's high-water mark (VmHWM) when it is
// allowed to, so the peak it reports belongs to this phase, then samples
// VmRSS until stop. Without the reset (another user's process) the peak is
// the one since the process started.
func startProcSampler(pid int) (*procSampler, error) {
	cpu0, err := procCPU(pid)
	if err != nil {
		return nil, fmt.Errorf("sampling process %d: %w", pid, err)
	}
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	s := &procSampler{pid: pid, cpu0: cpu0, stopCh: make(chan struct{})}
	s.done.Add(1)
	go s.run()
	return s, nil
}

func (s *procSampler) run() {
	defer s.done.Done()
	t := time.NewTicker(rssSampleInterval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stopCh:
			return
		case <-t.C:
		}
	}
}

func (s *procSampler) sample() {
	st, err := readProcStatus(s.pid)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.peakRSS = max(s.peakRSS, st.rss, st.hwm)
	s.mu.Unlock()
}

// stop ends sampling and returns what was seen since start.
func (s *procSampler) stop() procStats {
	close(s.stopCh)
	s.done.Wait()
	s.sample()
	cpu, _ := procCPU(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	return procStats{peakRSS: s.peakRSS, cpu: cpu - s.cpu0}
}

type memStatus struct {
	rss, hwm int64 // bytes
}

func readProcStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	return parseProcStatus(b)
}

// parseProcStatus reads VmRSS and VmHWM (in kB) from /proc/PID/status.
func parseProcStatus(b []byte) (memStatus, error) {
	var st memStatus
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return st, fmt.Errorf("unexpected %s line %q", name, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return st, fmt.Errorf("unexpected %s line %q", name, sc.Text())
		}
		if name == "VmRSS" {
			st.rss = kb << 10
		} else {
			st.hwm = kb << 10
		}
		found++
	}
	if found != 2 {
		return st, fmt.Errorf("VmRSS or VmHWM missing (a kernel thread or a zombie?)")
	}
	return st, nil
}

// procCPU is the user+system CPU time of all threads of pid.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU reads utime and stime, fields 14 and 15 of
// /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseProcStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, so f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed CPU field %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// machineCPU reads the busy and total CPU time of the whole machine from
// the first line of /proc/stat.
func machineCPU() (busy, total time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineCPU(b)
}

// parseMachineCPU sums the "cpu" line: user nice system idle iowait irq
// softirq steal (guest time is already part of user). Idle and iowait are
// not busy.
func parseMachineCPU(b []byte) (busy, total time.Duration, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	var ticks [8]int64
	for i := range ticks {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
		}
		ticks[i] = n
	}
	var sum int64
	for _, t := range ticks {
		sum += t
	}
	idle := ticks[3] + ticks[4]
	tick := time.Second / userHZ
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick, nil
}

// waitIdle waits until the machine as a whole keeps fewer than maxBusy
// cores busy over a two-second window, or until limit passes. It returns
// the busy cores of the last window.
func waitIdle(limit time.Duration, maxBusy float64) float64 {
	deadline := time.Now().Add(limit)
	for {
		b0, _, err := machineCPU()
		if err != nil {
			return 0
		}
		t0 := time.Now()
		time.Sleep(2 * time.Second)
		b1, _, err := machineCPU()
		if err != nil {
			return 0
		}
		busy := (b1 - b0).Seconds() / time.Since(t0).Seconds()
		if busy < maxBusy || time.Now().After(deadline) {
			return busy
		}
	}
}
