package erasure

import (
	"bytes"
	"testing"
)

// A decommissioned pool holds nothing and takes nothing: once its servers
// are gone (its drives offline) while nodes still list it, bucket
// operations and object traffic go on in the other pools.
func TestDecommissionedPoolWithItsDrivesGoneIsLeftOut(t *testing.T) {
	active, gone := newTestPool(t, 1, 4, 2), newTestPool(t, 1, 4, 2)
	ps := NewPools(NewPoolEntry("b", gone.Pool, StateDecommissioned), NewPoolEntry("a", active.Pool, StateActive))
	for _, s := range gone.Sets() {
		for i := range s.Drives() {
			s.SetDrive(i, nil)
		}
	}
	if err := ps.MakeBucket(t.Context(), "photos"); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	if err := ps.UpdateBucket(t.Context(), "photos", func(b *BucketInfo) { b.Tags = map[string]string{"team": "media"} }); err != nil {
		t.Fatalf("update bucket: %v", err)
	}
	if b, err := ps.StatBucket(t.Context(), "photos"); err != nil || b.Tags["team"] != "media" {
		t.Fatalf("stat bucket: %+v, %v", b, err)
	}
	body := bytes.Repeat([]byte("x"), 300<<10)
	if _, err := ps.PutObject(t.Context(), "photos", "k", bytes.NewReader(body), int64(len(body)), PutOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	if _, err := ps.ListObjects(t.Context(), "photos", "", "", "", 100); err != nil {
		t.Fatalf("list: %v", err)
	}
	if _, err := ps.DeleteObject(t.Context(), "photos", "k", nil, DeleteUnversioned); err != nil {
		t.Fatalf("delete object: %v", err)
	}
	if err := ps.DeleteBucket(t.Context(), "photos"); err != nil {
		t.Fatalf("delete bucket: %v", err)
	}
}
