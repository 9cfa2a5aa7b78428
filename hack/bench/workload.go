package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Op is one kind of workload, shaped like warp's benchmarks of the same name.
type Op string

const (
	OpPut    Op = "put"    // each request writes a new object
	OpGet    Op = "get"    // reads random objects of a prepared set
	OpHead   Op = "head"   // HEADs (stats) random objects of a prepared set
	OpDelete Op = "delete" // deletes each object of a prepared set once
	OpList   Op = "list"   // lists the whole prepared set, page by page
	OpMixed  Op = "mixed"  // GET/HEAD/PUT/DELETE drawn by weight
	// OpMultipart writes each new object as a multipart upload of
	// MultipartPartSize parts, multipartPartsInFlight of them at once.
	OpMultipart Op = "multipart"
)

var allOps = []Op{OpPut, OpGet, OpHead, OpDelete, OpList, OpMixed, OpMultipart}

// A multipart upload's shape: parts of 16 MiB (what the issue asks for),
// four of an upload in flight at once, as SDK transfer managers send them
// (aws-sdk-go-v2's manager defaults to five, the aws CLI to ten).
const (
	MultipartPartSize      = 16 << 20
	multipartPartsInFlight = 4
)

func parseOp(s string) (Op, error) {
	for _, op := range allOps {
		if strings.EqualFold(s, string(op)) || (op == OpHead && strings.EqualFold(s, "stat")) {
			return op, nil
		}
	}
	return "", fmt.Errorf("unknown workload %q (want one of put, get, head, delete, list, mixed, multipart)", s)
}

// needsPreparedObjects says whether the workload reads a set of objects that
// must be written before the measured phase starts.
func (op Op) needsPreparedObjects() bool {
	return op != OpPut && op != OpMultipart
}

// writes says whether each request of the workload writes a new object.
func (op Op) writes() bool { return op == OpPut || op == OpMultipart }

// readOnly says whether the workload leaves its objects as they were, so a
// warm-up pass can run before the measured one.
func (op Op) readOnly() bool {
	return op == OpGet || op == OpHead || op == OpList
}

// Workload is what one measured run does.
type Workload struct {
	Op          Op
	Size        int64         // object size in bytes
	Concurrency int           // parallel clients
	Duration    time.Duration // stop issuing requests after this long
	Count       int64         // and after this many requests (0: no count bound)
	Warmup      time.Duration // unmeasured run first (GET, HEAD and LIST only)
	Objects     int           // prepared objects (0: a default by op and size)
	Dirs        int           // directories the prepared set spreads over (0: 16)
	List        ListShape     // what a LIST lists of the prepared set
	Mix         Mix           // weights for OpMixed
}

// Name is how reports refer to the workload, e.g. "put-4KiB" or
// "list-4KiB-top".
func (w Workload) Name() string {
	name := fmt.Sprintf("%s-%s", w.Op, formatSize(w.Size))
	if w.Op == OpList && w.List != ListAll {
		name += "-" + string(w.List)
	}
	return name
}

// ListShape says which part of its prepared set a LIST workload lists.
type ListShape string

const (
	// ListAll pages through every object of the set, no delimiter (warp's LIST).
	ListAll ListShape = ""
	// ListTop lists the set's directories: its prefix with delimiter "/".
	ListTop ListShape = "top"
	// ListDir lists one directory of the set with delimiter "/".
	ListDir ListShape = "dir"
)

func parseListShape(s string) (ListShape, error) {
	switch ListShape(s) {
	case "all", ListAll:
		return ListAll, nil
	case ListTop, ListDir:
		return ListShape(s), nil
	}
	return "", fmt.Errorf("unknown listing %q (want all, top or dir)", s)
}

// Defaults for the prepared set: enough objects that reads do not hit one hot
// object, but capped in bytes so preparing 16 MiB objects stays short.
const (
	defaultPreparedObjects = 1000
	defaultDeleteObjects   = 2000
	preparedBytesCap       = 512 << 20
	minObjectsPerWorker    = 4
	defaultDirs            = 16
)

// Plan is a validated workload with its derived quantities. It is computed
// without touching the network so it can be table-tested.
type Plan struct {
	Workload
	// Prepared is the number of objects written before the measured phase.
	Prepared int
	// Count is the request bound of the measured phase (0: duration only).
	// For DELETE it never exceeds the prepared set.
	Count int64
	// ListPrefix and Delimiter are what each LIST asks for below the set's
	// prefix, and ListWant how many entries (objects and common prefixes)
	// a whole listing must return.
	ListPrefix string
	Delimiter  string
	ListWant   int
}

// plan validates w and fills in defaults.
func plan(w Workload) (Plan, error) {
	switch {
	case w.Size <= 0:
		return Plan{}, fmt.Errorf("object size must be positive, got %d", w.Size)
	case w.Concurrency <= 0:
		return Plan{}, fmt.Errorf("concurrency must be positive, got %d", w.Concurrency)
	case w.Duration <= 0 && w.Count <= 0:
		return Plan{}, errors.New("a workload needs a duration or a count bound")
	case w.Count < 0 || w.Objects < 0 || w.Warmup < 0 || w.Dirs < 0:
		return Plan{}, errors.New("count, objects, directories and warm-up cannot be negative")
	case w.Op == OpMultipart && w.Size <= MultipartPartSize:
		return Plan{}, fmt.Errorf("a multipart upload is of more than one part of %s, got %s", formatSize(MultipartPartSize), formatSize(w.Size))
	}
	if _, err := parseOp(string(w.Op)); err != nil {
		return Plan{}, err
	}
	if _, err := parseListShape(string(w.List)); err != nil {
		return Plan{}, err
	}
	p := Plan{Workload: w, Count: w.Count}
	if p.Dirs == 0 {
		p.Dirs = defaultDirs
	}
	if !w.Op.readOnly() {
		p.Warmup = 0
	}
	if w.Op == OpMixed {
		if err := w.Mix.validate(); err != nil {
			return Plan{}, err
		}
	}
	if !w.Op.needsPreparedObjects() {
		return p, nil
	}
	p.Prepared = w.Objects
	if p.Prepared == 0 {
		p.Prepared = defaultObjects(w.Op, w.Size, w.Concurrency)
	}
	if p.Prepared < w.Concurrency && w.Op != OpList {
		return Plan{}, fmt.Errorf("%d prepared objects cannot feed %d clients", p.Prepared, w.Concurrency)
	}
	if w.Op == OpDelete && (p.Count == 0 || p.Count > int64(p.Prepared)) {
		p.Count = int64(p.Prepared)
	}
	if w.Op == OpList {
		p.ListPrefix, p.Delimiter, p.ListWant = p.Set().listing(w.List)
	}
	return p, nil
}

// Set is a prepared set of objects: how many, of what size, spread over
// how many directories.
type Set struct {
	Size    int64
	Objects int
	Dirs    int
}

// Set is the prepared set the plan reads.
func (p Plan) Set() Set { return Set{Size: p.Size, Objects: p.Prepared, Dirs: p.Dirs} }

// key names object i of the set under prefix.
func (s Set) key(prefix string, i int) string { return preparedKey(prefix, i, s.Dirs) }

// listedDir is the directory a ListDir workload lists.
func (s Set) listedDir() int { return s.Dirs / 2 }

// listing returns what a LIST of the given shape asks for below the set's
// prefix and how many entries it must see.
func (s Set) listing(shape ListShape) (prefix, delimiter string, want int) {
	switch shape {
	case ListTop:
		return "", "/", min(s.Objects, s.Dirs)
	case ListDir:
		d := s.listedDir()
		n := s.Objects / s.Dirs
		if d < s.Objects%s.Dirs {
			n++
		}
		return dirName(d) + "/", "/", n
	}
	return "", "", s.Objects
}

func defaultObjects(op Op, size int64, concurrency int) int {
	n := defaultPreparedObjects
	if op == OpDelete {
		n = defaultDeleteObjects
	}
	if byBytes := int(preparedBytesCap / size); byBytes < n {
		n = byBytes
	}
	if floor := concurrency * minObjectsPerWorker; n < floor {
		n = floor
	}
	return n
}

// workerRange is the slice [lo, hi) of the prepared set that worker i of n
// owns: DELETE and MIXED only touch their own objects, so no two workers
// race on one key.
func workerRange(prepared, workers, i int) (lo, hi int) {
	per, extra := prepared/workers, prepared%workers
	lo = i*per + min(i, extra)
	hi = lo + per
	if i < extra {
		hi++
	}
	return lo, hi
}

// preparedKey names object i of a prepared set spread over dirs
// directories (16 by default), so POSIX backends do not put every object in
// one directory.
func preparedKey(prefix string, i, dirs int) string {
	return fmt.Sprintf("%s/%s/%08d", prefix, dirName(i%dirs), i)
}

func dirName(d int) string { return fmt.Sprintf("p%02d", d) }

// newKey names the seq-th object that worker writes during a measured phase.
func newKey(prefix string, worker int, seq int64) string {
	return fmt.Sprintf("%s/w%02d/%08d", prefix, worker, seq)
}

// Mix holds the relative weights of MIXED's operations. warp's default mix
// is 45% GET, 30% STAT, 15% PUT, 10% DELETE.
type Mix struct {
	Get, Head, Put, Delete int
}

var defaultMix = Mix{Get: 45, Head: 30, Put: 15, Delete: 10}

func (m Mix) total() int { return m.Get + m.Head + m.Put + m.Delete }

func (m Mix) validate() error {
	if m.Get < 0 || m.Head < 0 || m.Put < 0 || m.Delete < 0 {
		return errors.New("mix weights cannot be negative")
	}
	if m.total() == 0 {
		return errors.New("mix weights add up to zero")
	}
	return nil
}

// pick maps r, uniform in [0, total), to an operation.
func (m Mix) pick(r int) Op {
	switch {
	case r < m.Get:
		return OpGet
	case r < m.Get+m.Head:
		return OpHead
	case r < m.Get+m.Head+m.Put:
		return OpPut
	default:
		return OpDelete
	}
}

func (m Mix) String() string {
	return fmt.Sprintf("get=%d,head=%d,put=%d,delete=%d", m.Get, m.Head, m.Put, m.Delete)
}

// parseMix reads "get=45,head=30,put=15,delete=10"; omitted operations weigh 0.
func parseMix(s string) (Mix, error) {
	var m Mix
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix entry %q is not op=weight", part)
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return Mix{}, fmt.Errorf("mix weight %q is not a non-negative integer", val)
		}
		op, err := parseOp(name)
		if err != nil {
			return Mix{}, err
		}
		switch op {
		case OpGet:
			m.Get = n
		case OpHead:
			m.Head = n
		case OpPut:
			m.Put = n
		case OpDelete:
			m.Delete = n
		default:
			return Mix{}, fmt.Errorf("%s cannot be part of a mix", op)
		}
	}
	return m, m.validate()
}

var sizeUnits = []struct {
	suffix string
	scale  int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// parseSize reads sizes such as 4KiB, 16MiB, 1M or 512 (bytes). K, M and G
// are binary units, as in warp.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	scale := int64(1)
	for _, u := range sizeUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, scale = t[:len(t)-len(u.suffix)], u.scale
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4KiB, 1MiB)", s)
	}
	return n * scale, nil
}

func parseSizes(s string) ([]int64, error) {
	var sizes []int64
	for _, part := range strings.Split(s, ",") {
		n, err := parseSize(part)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, n)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	return sizes, nil
}

// formatSize prints the largest binary unit that divides n exactly.
func formatSize(n int64) string {
	for _, u := range sizeUnits[:3] {
		if n >= u.scale && n%u.scale == 0 {
			return fmt.Sprintf("%d%s", n/u.scale, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
