// Package memlimit finds the memory a process may use (its container's
// limit) and sizes what the engine holds in memory from it: the Go
// runtime's soft limit (GOMEMLIMIT) and how many requests may move object
// data at once.
package memlimit

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// EnvLimit names the environment variable the operator sets from the
// container's memory limit through the downward API (limits.memory, in
// bytes).
const EnvLimit = "STRATA_MEMORY_LIMIT"

// Limit is the memory the process may use and where that figure came
// from.
type Limit struct {
	// Bytes is the limit; 0 when none was found.
	Bytes int64
	// Source says where it was found: "flag", EnvLimit, the cgroup file,
	// or "" for none.
	Source string
}

// Find returns the limit: flag when it is set (a quantity such as 1Gi or
// a number of bytes), else EnvLimit, else the smallest memory limit of
// the process's cgroup and its ancestors (cgroup v2 memory.max, v1
// memory.limit_in_bytes). A cgroup without a limit (or one above the
// machine's memory) is no limit.
func Find(flag string, getenv func(string) string) (Limit, error) {
	for _, c := range []struct{ value, source string }{{flag, "flag"}, {getenv(EnvLimit), EnvLimit}} {
		if c.value == "" {
			continue
		}
		n, err := parseBytes(c.value)
		if err != nil {
			return Limit{}, fmt.Errorf("memory limit from %s: %w", c.source, err)
		}
		return Limit{Bytes: n, Source: c.source}, nil
	}
	return fromCgroup("/proc/self/cgroup", "/sys/fs/cgroup"), nil
}

// units are the suffixes Kubernetes quantities of memory use.
var units = []struct {
	suffix string
	factor int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseBytes reads a number of bytes, with or without one of units.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, factor := s, int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, factor = v, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/factor {
		return 0, fmt.Errorf("%q is not a positive quantity of bytes such as 1Gi or 1073741824", s)
	}
	return n * factor, nil
}

// fromCgroup reads the limits of the cgroups /proc/self/cgroup names,
// under root (where the hierarchies are mounted).
func fromCgroup(procCgroup, root string) Limit {
	f, err := os.Open(procCgroup)
	if err != nil {
		return Limit{}
	}
	defer f.Close()
	best := Limit{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = root, "memory.max"
			if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
				dir = filepath.Join(root, "unified") // v1 and v2 side by side
			}
		case hasController(parts[1], "memory"):
			dir, file = filepath.Join(root, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		if l := smallestUp(dir, parts[2], file); l.Bytes > 0 && (best.Bytes == 0 || l.Bytes < best.Bytes) {
			best = l
		}
	}
	return best
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// smallestUp is the smallest limit in file from the cgroup at path up to
// the hierarchy's root. Inside a container's cgroup namespace the path is
// "/" and the container's own limit is at the mount's root.
func smallestUp(mount, path, file string) Limit {
	best := Limit{}
	for p := filepath.Clean("/" + path); ; p = filepath.Dir(p) {
		name := filepath.Join(mount, p, file)
		if n := readLimit(name); n > 0 && (best.Bytes == 0 || n < best.Bytes) {
			best = Limit{Bytes: n, Source: name}
		}
		if p == "/" {
			return best
		}
	}
}

// readLimit reads one limit file: 0 for "max", an unreadable file, or a
// figure no machine has (v1 writes its "unlimited" as about 2^63).
func readLimit(name string) int64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= math.MaxInt64/2 {
		return 0
	}
	return n
}

// SoftLimitShare is the share of the limit the Go runtime's soft limit
// gets: the rest is for what the runtime does not count against it
// (thread stacks outside the heap, pebble's own buffers, the kernel's page
// cache charged to the container) and for the collector to catch up.
const SoftLimitShare = 0.8

// ApplySoftLimit sets the runtime's soft memory limit to SoftLimitShare
// of l, unless GOMEMLIMIT is set (the runtime has read it then) or there
// is no limit. It returns the soft limit in force (math.MaxInt64: none).
func ApplySoftLimit(l Limit, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" || l.Bytes <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	soft := int64(float64(l.Bytes) * SoftLimitShare)
	debug.SetMemoryLimit(soft)
	return soft
}

// GCPercent is the collector's target (GOGC) a process without a memory
// limit runs with unless GOGC is set: the heap grows by half its live size
// between collections, not by all of it, as nothing else bounds it. With
// a limit the runtime's default (100) stays and the soft limit bounds the
// heap: the room a pod is given is used before collections come more often.
// Measured on 2026-11-29 (4 drives, 16 clients, no limit): peak RSS over
// the engine suite 357 MiB instead of 459 (MinIO 923), over a 4 KiB PUT
// run 113 instead of 141; server CPU per request the same on 4 KiB PUT,
// GET and HEAD and on large PUTs, 5-9% more on GETs of 1 and 16 MiB.
const GCPercent = 50

// ApplyGCPercent sets the collector's target to GCPercent when there is
// no limit and GOGC is not set (the runtime has read it then), and returns
// the target in force.
func ApplyGCPercent(l Limit, getenv func(string) string) int {
	if getenv("GOGC") != "" || l.Bytes > 0 {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}

// DataSlotBytes is what one request moving object data holds in memory,
// at most, on the erasure-coded server: measured at about 6 MiB resident
// per PUT of 16 MiB in flight (64 at once peaked at 444 MiB, 16 at 154,
// GOGC 100 and no soft limit: two blocks of 1 MiB with room for their
// parity, and an O_DIRECT buffer of 512 KiB per drive), with room for the
// collector to catch up. (16 MiB until 2026-11-29, when a PUT also
// allocated a buffer per drive and grew its first block by doubling.)
const DataSlotBytes = 8 << 20

// What a server holds whatever its load, and how the rest is shared.
const (
	// baseBytes is the runtime's own, the goroutines and buffers of idle
	// connections and the metrics: an idle server with four drives is
	// about 25 MiB resident.
	baseBytes = 48 << 20
	// The drives' metadata (block cache and memtables, shared by every
	// drive of the node) gets a quarter of the limit, between minMeta and
	// maxMeta; its memtables a 32nd of that, between 1 and 8 MiB each
	// (pebble keeps up to three a drive, so a budget covers about ten
	// drives' memtables before the cache gives way to them).
	metaDivisor     = 4
	minMeta         = 16 << 20
	maxMeta         = 2 << 30
	memTableDivisor = 32
	minMemTable     = 1 << 20
	maxMemTable     = 8 << 20
)

// Plan is how a server spends its memory limit.
type Plan struct {
	// Limit is the limit planned for; 0: none, and everything else is
	// zero (the defaults, no bound on data requests).
	Limit int64
	// Meta is the drives' shared metadata cache, memtables included.
	Meta int64
	// MemTable is the size of each memtable of each drive.
	MemTable int64
	// DataSlots is how many requests may move object data at once.
	DataSlots int
}

// PlanFor divides limit: metadata first, baseBytes, and the rest of the
// runtime's soft limit (SoftLimitShare) to requests moving object data, at
// DataSlotBytes each and at least minSlots.
func PlanFor(limit int64, minSlots int) Plan {
	if limit <= 0 {
		return Plan{}
	}
	meta := min(max(limit/metaDivisor, minMeta), maxMeta)
	data := int64(float64(limit)*SoftLimitShare) - meta - baseBytes
	return Plan{
		Limit:     limit,
		Meta:      meta,
		MemTable:  min(max(meta/memTableDivisor, minMemTable), maxMemTable),
		DataSlots: max(minSlots, int(data/DataSlotBytes)),
	}
}
