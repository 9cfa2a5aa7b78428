package s3api

import (
	"maps"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// TestSnapshotDescription: what a write keeps of its version for the
// copy decodes to the same size, time, ETag and metadata; a cut or
// lengthened description is refused rather than read wrong.
func TestSnapshotDescription(t *testing.T) {
	info := &objlayer.ObjectInfo{Size: 4096, ModTime: time.Unix(1764547200, 123456789), ETag: "0123abcd",
		Meta: map[string]string{objlayer.MetaContentType: "text/x-test", "X-Amz-Meta-Origin": "ä b", "X-Amz-Tagging": "a=1&b=2", "Empty": ""}}
	desc := encodeSnapshot(info)
	got, err := decodeSnapshot(desc)
	if err != nil || got.Size != info.Size || !got.ModTime.Equal(info.ModTime) || got.ETag != info.ETag || !maps.Equal(got.Meta, info.Meta) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, *info)
	}
	for i := range desc {
		if _, err := decodeSnapshot(desc[:i]); err == nil {
			t.Fatalf("a description cut at %d of %d bytes decoded", i, len(desc))
		}
	}
	if _, err := decodeSnapshot(append(desc, 0)); err == nil {
		t.Fatal("a description with a byte more decoded")
	}
	if got, err := decodeSnapshot(encodeSnapshot(&objlayer.ObjectInfo{})); err != nil || len(got.Meta) != 0 {
		t.Fatalf("an empty description: %+v, %v", got, err)
	}
}
