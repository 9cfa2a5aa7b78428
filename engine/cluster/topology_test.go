package cluster

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A peer whose name does not resolve yet (its pod has no address) is
// waited for, within ResolveWait; other failures are not retried.
func TestLocalityWaitsForNamesToResolve(t *testing.T) {
	calls := map[string]int{}
	resolve := func(host string) ([]net.IP, error) {
		calls[host]++
		switch {
		case host == "late" && calls[host] < 3:
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		case host == "broken":
			return nil, errors.New("resolver exploded")
		case host == "never":
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []net.IP{net.ParseIP("10.0.0.2")}, nil
	}
	var logged []string
	loc := Locality{Address: ":9000", LocalIPs: []net.IP{net.ParseIP("10.0.0.1")}, Resolve: resolve,
		ResolveWait: 3 * time.Second, Logf: func(f string, a ...any) { logged = append(logged, f) }}

	local, err := loc.IsLocal("late:9000")
	if err != nil || local || calls["late"] != 3 {
		t.Fatalf("late name: local=%v err=%v after %d lookups, want remote after 3", local, err, calls["late"])
	}
	if len(logged) != 1 {
		t.Errorf("the wait was logged %d times, want once", len(logged))
	}
	if _, err := loc.IsLocal("broken:9000"); err == nil || calls["broken"] != 1 {
		t.Errorf("a resolver failure: err=%v after %d lookups, want an error at once", err, calls["broken"])
	}
	start := time.Now()
	_, err = loc.IsLocal("never:9000")
	if err == nil || !strings.Contains(err.Error(), "resolving never") {
		t.Errorf("a name that never resolves: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second || calls["never"] < 3 {
		t.Errorf("a name that never resolves was tried %d times over %s, want several within ResolveWait", calls["never"], d)
	}
	loc.ResolveWait = 0
	calls["never"] = 0
	if _, err := loc.IsLocal("never:9000"); err == nil || calls["never"] != 1 {
		t.Errorf("without ResolveWait: err=%v after %d lookups, want one", err, calls["never"])
	}
}
