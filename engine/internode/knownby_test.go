package internode

import "testing"

// A pool is known by all only when every peer's last answer lists it: a
// peer that never answered, or that is offline now and last said it did
// not know the pool, holds it back; one offline now that knew it does not.
func TestKnownByAll(t *testing.T) {
	peer := func(answered, online bool, pools ...string) *Peer {
		p, err := NewPeer("node:9000", 9001, PeerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if answered {
			m := map[string]bool{}
			for _, name := range pools {
				m[name] = true
			}
			p.pools.Store(&m)
			p.answered.Store(true)
		}
		p.online.Store(online)
		return p
	}
	knows := peer(true, true, "a", "b")
	for _, tc := range []struct {
		name  string
		peers []*Peer
		want  bool
	}{
		{"every peer says so", []*Peer{knows, peer(true, true, "b")}, true},
		{"no peers", nil, true},
		{"one has not loaded it", []*Peer{knows, peer(true, true, "a")}, false},
		{"one never answered", []*Peer{knows, peer(false, true)}, false},
		{"one offline that did not know it", []*Peer{knows, peer(true, false, "a")}, false},
		{"one offline that knew it", []*Peer{knows, peer(true, false, "b")}, true},
	} {
		if got := KnownByAll(tc.peers, "b"); got != tc.want {
			t.Errorf("%s: KnownByAll = %v, want %v", tc.name, got, tc.want)
		}
	}
}
