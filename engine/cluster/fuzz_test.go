package cluster

import (
	"errors"
	"net"
	"testing"
)

// FuzzExpandEllipses: any endpoint argument expands or is refused without
// panicking, and never to more than maxExpansion endpoints.
func FuzzExpandEllipses(f *testing.F) {
	for _, a := range []string{"/data/d{1...4}", "http://h{01...16}:9000/d{1...2}", "{9...1}", "{0...99999999999999999999}", "{0...9223372036854775807}", "x{1...2}{3...4}{5...6}"} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		out, err := ExpandEllipses(arg)
		if err == nil && len(out) > maxExpansion {
			t.Fatalf("%q expanded to %d endpoints", arg, len(out))
		}
	})
}

// FuzzTopology: any topology file is accepted or refused without
// panicking; the pools of an accepted one lay out or are refused with an
// error, never a panic.
func FuzzTopology(f *testing.F) {
	f.Add([]byte(`{"version":1,"pools":[{"name":"pool-0","endpoints":["http://s{1...4}:9000/data{1...2}"],"setSize":4,"parity":2}]}`))
	f.Add([]byte(`{"version":1,"deploymentID":"not-a-uuid","pools":[]}`))
	f.Add([]byte(`{"version":1,"pools":[{"name":"a","state":"Draining","endpoints":["/d{1...4}"]}]}`))
	loc := Locality{Address: "s1:9000", LocalIPs: []net.IP{net.IPv4(10, 0, 0, 1)},
		Resolve: func(string) ([]net.IP, error) { return nil, errors.New("no DNS in a fuzz test") }}
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := ParseTopology(data)
		if err != nil {
			return
		}
		for _, p := range topo.Pools {
			_, _ = p.Layout(loc)
		}
	})
}

// FuzzParseEndpoint: any endpoint string parses or is refused.
func FuzzParseEndpoint(f *testing.F) {
	for _, e := range []string{"/data/d1", "http://10.0.0.1:9000/data1", "https://[::1]:9000/x", "ftp://h/x", "http://h", "relative/path"} {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, raw string) { _, _ = ParseEndpoint(raw) })
}
