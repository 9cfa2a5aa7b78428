package erasure

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

// TestUploadListingsPage: a listing of multipart uploads reads the drives
// a batch at a time (7 here) and still lists every upload once, in
// (object, start) order, across two sets, through pages of every size,
// with a prefix and a delimiter; an upload only one drive holds (less
// than read quorum) is not listed.
func TestUploadListingsPage(t *testing.T) {
	defer func(n int) { uploadBatch = n }(uploadBatch)
	uploadBatch = 7
	tp := newTestPool(t, 2, 4, 2)
	ctx := t.Context()
	var want []string
	for i := range 23 {
		for j := range 1 + i%3 { // several uploads of some objects
			obj := fmt.Sprintf("dir%d/obj%02d", i%4, i)
			u, err := tp.NewMultipartUpload(ctx, "bk", obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, obj+"#"+fmt.Sprint(j))
			_ = u
		}
	}
	slices.Sort(want)
	// A stray upload on one drive of a set: not a committed upload.
	stray := &drive.Upload{ID: [16]byte{1}, Bucket: "bk", Object: "dir0/stray"}
	if err := tp.drives[0].PutUpload(ctx, stray); err != nil {
		t.Fatal(err)
	}

	name := func(us []objlayer.UploadInfo) []string {
		var out []string
		seen := map[string]int{}
		for _, u := range us {
			out = append(out, u.Object+"#"+fmt.Sprint(seen[u.Object]))
			seen[u.Object]++
		}
		return out
	}
	var all []objlayer.UploadInfo
	if err := tp.EachUpload(ctx, "bk", "", func(u objlayer.UploadInfo) (bool, error) {
		all = append(all, u)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := name(all); !slices.Equal(got, want) {
		t.Fatalf("every upload:\n got %v\nwant %v", got, want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Object == all[i-1].Object && all[i].Initiated.Before(all[i-1].Initiated) {
			t.Fatalf("uploads of %s not in the order they began", all[i].Object)
		}
	}

	for _, size := range []int{1, 2, 5, 7, 8, 100} {
		var got []objlayer.UploadInfo
		key, id := "", objlayer.NullVersion
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("page size %d: no end", size)
			}
			l, err := tp.ListMultipartUploads(ctx, "bk", "", key, id, "", size)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Uploads) > size {
				t.Fatalf("page size %d: %d uploads", size, len(l.Uploads))
			}
			got = append(got, l.Uploads...)
			if !l.IsTruncated {
				break
			}
			key, id = l.NextKeyMarker, l.NextUploadID
		}
		if g := name(got); !slices.Equal(g, want) {
			t.Fatalf("pages of %d:\n got %v\nwant %v", size, g, want)
		}
	}

	// A prefix and a delimiter: dir1/ holds objects 1, 5, ... 21.
	l, err := tp.ListMultipartUploads(ctx, "bk", "dir1/", "", objlayer.NullVersion, "", 1000)
	if err != nil || len(l.Uploads) == 0 {
		t.Fatalf("prefix: %v %v", l, err)
	}
	for _, u := range l.Uploads {
		if u.Object[:5] != "dir1/" {
			t.Fatalf("prefix dir1/ listed %s", u.Object)
		}
	}
	var prefixes []string
	key := ""
	for {
		l, err := tp.ListMultipartUploads(ctx, "bk", "", key, objlayer.NullVersion, "/", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Uploads) != 0 {
			t.Fatalf("delimiter: uploads listed beside the common prefixes: %v", l.Uploads)
		}
		prefixes = append(prefixes, l.CommonPrefixes...)
		if !l.IsTruncated {
			break
		}
		key = l.NextKeyMarker
	}
	if !slices.Equal(prefixes, []string{"dir0/", "dir1/", "dir2/", "dir3/"}) {
		t.Fatalf("common prefixes one per page: %v", prefixes)
	}
}
