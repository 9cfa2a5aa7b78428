package erasure

import (
	"errors"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/objlayer"
)

func TestResolveQuorum(t *testing.T) {
	set, err := NewSet(make([]Drive, 4), 2) // 2+2: read quorum 2
	if err != nil {
		t.Fatal(err)
	}
	old := &drive.Record{ModTime: 10, ETag: "old"}
	cur := &drive.Record{ModTime: 20, ETag: "new"}
	lone := &drive.Record{ModTime: 30, ETag: "uncommitted"}
	nf, off := drive.ErrVersionNotFound, errDriveOffline
	cases := []struct {
		name    string
		recs    []*drive.Record
		errs    []error
		want    *drive.Record
		wantErr error
	}{
		{"all agree", []*drive.Record{cur, cur, cur, cur}, []error{nil, nil, nil, nil}, cur, nil},
		{"newest held by quorum wins", []*drive.Record{old, cur, cur, old}, []error{nil, nil, nil, nil}, cur, nil},
		{"a newer record on one drive is not yet committed", []*drive.Record{lone, cur, cur, old}, []error{nil, nil, nil, nil}, cur, nil},
		{"parity drives offline", []*drive.Record{nil, nil, cur, cur}, []error{off, off, nil, nil}, cur, nil},
		{"not found on enough drives", []*drive.Record{nil, nil, nil, cur}, []error{nf, nf, nf, nil}, nil, objlayer.ErrObjectNotFound},
		{"too few answers to know", []*drive.Record{nil, nil, nil, cur}, []error{off, off, nf, nil}, nil, objlayer.ErrReadQuorum},
		{"nothing anywhere", []*drive.Record{nil, nil, nil, nil}, []error{nf, nf, nf, nf}, nil, objlayer.ErrObjectNotFound},
	}
	for _, c := range cases {
		got, agreeing, err := set.resolve(c.recs, c.errs)
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("%s: err %v, want %v", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v %v, want %+v", c.name, got, err, c.want)
			continue
		}
		for pos, r := range agreeing {
			if (r != nil) != (c.recs[pos] != nil && sameVersion(c.recs[pos], c.want)) {
				t.Errorf("%s: position %d agreeing=%v", c.name, pos, r != nil)
			}
		}
	}
}
