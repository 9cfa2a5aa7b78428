package internode

import "testing"

// A peer counts as knowing a pool when its last answer lists it: not a
// peer that never answered, nor one offline now that last said it did not
// know the pool; one offline now that knew it does.
func TestKnownBy(t *testing.T) {
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
		want  int
	}{
		{"every peer says so", []*Peer{knows, peer(true, true, "b")}, 2},
		{"no peers", nil, 0},
		{"one has not loaded it", []*Peer{knows, peer(true, true, "a")}, 1},
		{"one never answered", []*Peer{knows, peer(false, true)}, 1},
		{"one offline that did not know it", []*Peer{knows, peer(true, false, "a")}, 1},
		{"one offline that knew it", []*Peer{knows, peer(true, false, "b")}, 2},
	} {
		if got := KnownBy(tc.peers, "b"); got != tc.want {
			t.Errorf("%s: KnownBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}
