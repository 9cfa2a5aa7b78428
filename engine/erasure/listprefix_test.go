package erasure

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// sliceWalker walks a sorted list of keys, counting what it reads; with
// delimit, it skips the keys under a common prefix after its first, as
// drives do.
type sliceWalker struct {
	keys        []string
	read, walks int
	delimit     bool
}

func (w *sliceWalker) walk(_ context.Context, _, prefix, delimiter, startAfter string, limit int, _ bool) ([]listEntry, bool, error) {
	i := sort.SearchStrings(w.keys, startAfter)
	for i < len(w.keys) && w.keys[i] <= startAfter {
		i++
	}
	var out []listEntry
	for i < len(w.keys) && len(out) < limit {
		k := w.keys[i]
		i++
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		out = append(out, listEntry{name: k, versions: []*drive.Record{{ModTime: 1}}})
		if cp, ok := commonPrefix(k, prefix, delimiter); ok && w.delimit {
			i = sort.SearchStrings(w.keys, cp+maxListKey)
		}
	}
	w.read += len(out)
	w.walks++
	return out, i < len(w.keys), nil
}

func (w *sliceWalker) delimits() bool { return w.delimit }

// TestDelimiterListingSkipsPrefixes: a listing with a delimiter reads a
// small batch past each common prefix instead of every key under it, and
// lists the same.
func TestDelimiterListingSkipsPrefixes(t *testing.T) {
	var keys []string
	for d := 0; d < 100; d++ {
		for k := 0; k < 1000; k++ {
			keys = append(keys, fmt.Sprintf("dir%03d/obj%04d", d, k))
		}
	}
	keys = append(keys, "top-a", "top-b")
	sort.Strings(keys)
	w := &sliceWalker{keys: keys}
	res, err := listObjects(t.Context(), w, "b", "", "", "/", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CommonPrefixes) != 100 || len(res.Objects) != 2 || res.IsTruncated {
		t.Fatalf("%d prefixes, %d objects, truncated %v", len(res.CommonPrefixes), len(res.Objects), res.IsTruncated)
	}
	if w.read > 100*prefixProbe+10 {
		t.Fatalf("read %d keys to list 100 prefixes", w.read)
	}
	// A walker that skips prefixes itself: one walk, a key per prefix.
	dw := &sliceWalker{keys: keys, delimit: true}
	dres, err := listObjects(t.Context(), dw, "b", "", "", "/", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dres) != fmt.Sprint(res) || dw.walks != 1 || dw.read != 102 {
		t.Fatalf("delimiting walker: %d walks, %d keys read, same listing %v", dw.walks, dw.read, fmt.Sprint(dres) == fmt.Sprint(res))
	}
	// Pages of 7 end and resume at prefixes.
	var all []string
	marker := ""
	for {
		page, err := listObjects(t.Context(), &sliceWalker{keys: keys, delimit: len(all)%2 == 0}, "b", "", marker, "/", 7)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.CommonPrefixes...)
		for _, o := range page.Objects {
			all = append(all, o.Name)
		}
		if !page.IsTruncated {
			break
		}
		marker = page.NextMarker
	}
	if len(all) != 102 || all[0] != "dir000/" || all[99] != "dir099/" || all[101] != "top-b" {
		t.Fatalf("paged listing: %d entries, %v ... %v", len(all), all[:2], all[len(all)-2:])
	}
	// Versions too.
	w = &sliceWalker{keys: keys}
	vres, err := listVersions(t.Context(), w, "b", "dir0", "", nil, "/", 1000)
	if err != nil || len(vres.CommonPrefixes) != 100 || w.read > 100*(prefixProbe+1)+listBatch {
		t.Fatalf("versions: %d prefixes, read %d, %v", len(vres.CommonPrefixes), w.read, err)
	}
}

// TestListPageReadsWhatItReturns: a full page reads its keys and one more
// (which says the page is truncated), not a second batch; versions too.
func TestListPageReadsWhatItReturns(t *testing.T) {
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("obj%05d", i)
	}
	for _, versions := range []bool{false, true} {
		w := &sliceWalker{keys: keys}
		marker, pages := "", 0
		for {
			var page objlayer.ListResult
			var err error
			if versions {
				page, err = listVersions(t.Context(), w, "b", "", marker, nil, "", 1000)
			} else {
				page, err = listObjects(t.Context(), w, "b", "", marker, "", 1000)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) != 1000 || page.IsTruncated != (pages < 4) {
				t.Fatalf("versions %v, page %d: %d objects, truncated %v", versions, pages, len(page.Objects), page.IsTruncated)
			}
			pages++
			if !page.IsTruncated {
				break
			}
			marker = page.NextMarker
		}
		if w.walks != 5 || w.read != 5000+4 {
			t.Fatalf("versions %v: 5 pages of 1,000 took %d walks reading %d keys (want 5 walks, 5,004 keys)", versions, w.walks, w.read)
		}
	}
}
