package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindPrefersFlagThenEnvironment(t *testing.T) {
	env := map[string]string{EnvLimit: "2147483648"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		flag   string
		want   int64
		source string
	}{
		{"1Gi", 1 << 30, "flag"},
		{"1500M", 1500e6, "flag"},
		{"", 2 << 30, EnvLimit},
	} {
		l, err := Find(tc.flag, getenv)
		if err != nil || l.Bytes != tc.want || l.Source != tc.source {
			t.Errorf("Find(%q) = %+v, %v; want %d from %s", tc.flag, l, err, tc.want, tc.source)
		}
	}
	for _, bad := range []string{"lots", "-1Gi", "0", "1.5Gi", "9999999999Ti"} {
		if _, err := Find(bad, getenv); err == nil {
			t.Errorf("Find(%q) accepted", bad)
		}
	}
}

func TestFromCgroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proc  string
		files map[string]string
		want  int64
	}{
		{name: "v1, the container's own limit at the root of its namespace",
			proc:  "4:memory:/\n3:cpuset:/\n",
			files: map[string]string{"memory/memory.limit_in_bytes": "1073741824"}, want: 1 << 30},
		{name: "v1 unlimited", proc: "4:memory:/a/b\n",
			files: map[string]string{"memory/a/b/memory.limit_in_bytes": "9223372036854771712"}},
		{name: "v1, a parent's limit is smaller", proc: "4:cpu,memory:/pods/p1\n",
			files: map[string]string{"memory/pods/memory.limit_in_bytes": "536870912", "memory/pods/p1/memory.limit_in_bytes": "1073741824"}, want: 512 << 20},
		{name: "v2", proc: "0::/kubepods/pod1/c1\n",
			files: map[string]string{"cgroup.controllers": "memory", "kubepods/pod1/c1/memory.max": "268435456", "kubepods/memory.max": "max"}, want: 256 << 20},
		{name: "v2 without a limit", proc: "0::/\n",
			files: map[string]string{"cgroup.controllers": "memory", "memory.max": "max"}},
		{name: "v1 and v2 side by side: the smaller", proc: "4:memory:/x\n0::/y\n",
			files: map[string]string{"memory/x/memory.limit_in_bytes": "2147483648", "unified/y/memory.max": "1073741824"}, want: 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			proc := filepath.Join(dir, "proc-cgroup")
			write(t, proc, tc.proc)
			for name, content := range tc.files {
				write(t, filepath.Join(dir, "sys", name), content)
			}
			if got := fromCgroup(proc, filepath.Join(dir, "sys")); got.Bytes != tc.want {
				t.Errorf("limit %d (from %s), want %d", got.Bytes, got.Source, tc.want)
			}
		})
	}
}

func TestPlanFor(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		limit int64
		want  Plan
	}{
		{0, Plan{}},
		// 204.8 MiB soft limit - 64 MiB of metadata - 48 MiB base = 11 slots.
		{256 * mi, Plan{Limit: 256 * mi, Meta: 64 * mi, MemTable: 2 * mi, DataSlots: 11}},
		{1 << 30, Plan{Limit: 1 << 30, Meta: 256 * mi, MemTable: 8 * mi, DataSlots: 64}},
		// Nothing left for data: the minimum; the smallest metadata budget.
		{64 * mi, Plan{Limit: 64 * mi, Meta: 16 * mi, MemTable: 1 * mi, DataSlots: 4}},
		{64 << 30, Plan{Limit: 64 << 30, Meta: 2 << 30, MemTable: 8 * mi, DataSlots: 6291}},
	} {
		if got := PlanFor(tc.limit, 4); got != tc.want {
			t.Errorf("PlanFor(%d MiB) = %+v, want %+v", tc.limit/mi, got, tc.want)
		}
	}
}

// TestApplyGCPercent: GCPercent without a limit, unless GOGC is set, when
// the runtime's target (read from GOGC at start) stays; with a limit too.
func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	none := func(string) string { return "" }
	if got := ApplyGCPercent(Limit{}, none); got != GCPercent {
		t.Fatalf("without GOGC or a limit: %d, want %d", got, GCPercent)
	}
	if now := debug.SetGCPercent(100); now != GCPercent {
		t.Fatalf("the runtime's target is %d, want %d", now, GCPercent)
	}
	if got := ApplyGCPercent(Limit{Bytes: 1 << 30}, none); got != 100 {
		t.Fatalf("with a limit: %d, want the runtime's 100", got)
	}
	debug.SetGCPercent(80) // as GOGC=80 would have set it
	env := map[string]string{"GOGC": "80"}
	if got := ApplyGCPercent(Limit{}, func(k string) string { return env[k] }); got != 80 {
		t.Fatalf("with GOGC=80: %d", got)
	}
	if now := debug.SetGCPercent(80); now != 80 {
		t.Fatalf("with GOGC=80 the runtime's target became %d", now)
	}
}
