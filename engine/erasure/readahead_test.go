package erasure

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// listAll pages through a bucket, maxKeys at a time, calling between after
// each page.
func listAll(t *testing.T, tp *testPool, maxKeys int, between func(page int)) []string {
	t.Helper()
	var names []string
	marker := ""
	for page := 1; ; page++ {
		res, err := tp.ListObjects(t.Context(), "bk", "", marker, "", maxKeys)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			names = append(names, o.Name)
		}
		if !res.IsTruncated {
			return names
		}
		marker = res.NextMarker
		between(page)
	}
}

// waitAhead waits for the set's walks ahead to finish.
func waitAhead(s *Set) {
	s.ahead.mu.Lock()
	walks := slices.Clone(s.ahead.walks)
	s.ahead.mu.Unlock()
	for _, w := range walks {
		<-w.done
	}
}

// TestListingReadsAhead: a listing paging through a set is answered from
// walks ahead from its third page on, and lists the same; a write to the
// drives after a walk ahead began (a PUT, a delete) drops it, so the pages
// after show the write.
func TestListingReadsAhead(t *testing.T) {
	tp := newTestPool(t, 1, 4, 2)
	var want []string
	for i := range 3500 {
		k := fmt.Sprintf("obj%05d", i*10)
		tp.put(t, k, []byte(k))
		want = append(want, k)
	}
	set := tp.Sets()[0]

	got := listAll(t, tp, 1000, func(int) { waitAhead(set) })
	if !slices.Equal(got, want) {
		t.Fatalf("listing with walks ahead: %d names, want %d", len(got), len(want))
	}
	if n := set.ahead.served.Load(); n != 2 {
		t.Fatalf("%d pages of 4 answered from walks ahead, want 2 (pages 3 and 4)", n)
	}

	// After page 2 a walk ahead covers page 3; a PUT and a delete in its
	// range land after it began.
	set.ahead.served.Store(0)
	got = listAll(t, tp, 1000, func(page int) {
		waitAhead(set)
		if page == 2 {
			tp.put(t, "obj25005", []byte("new"))
			if _, err := tp.DeleteObject(t.Context(), "bk", "obj26000", nil, objlayer.DeleteUnversioned); err != nil {
				t.Fatal(err)
			}
		}
	})
	want = slices.DeleteFunc(append(want, "obj25005"), func(k string) bool { return k == "obj26000" })
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listing after writes a walk ahead missed: %d names, want %d; obj25005 listed %v, obj26000 listed %v",
			len(got), len(want), slices.Contains(got, "obj25005"), slices.Contains(got, "obj26000"))
	}
	if n := set.ahead.served.Load(); n != 1 {
		t.Fatalf("%d pages answered from walks ahead, want 1 (page 4: page 3's walk ahead began before the writes)", n)
	}
}
