package internode

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
)

// FuzzReadFrame: any byte stream read as frames either fails or yields
// frames within the size bound, and a frame written is read back as it was.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, 7, frameBatchGet, []byte("body")))
	f.Add(appendFrame(appendFrame(nil, 1, frameOK, nil), 2, frameErr, []byte("no such drive")))
	f.Add([]byte{0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0}) // shorter than its own header
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			_, _, body, err := readFrame(r)
			if err != nil {
				break
			}
			if len(body) > maxFrame {
				t.Fatalf("a frame of %d bytes was accepted", len(body))
			}
		}
		id, kind := uint64(len(data))*31, byte(len(data)%4)
		if len(data)+9 > maxFrame {
			return
		}
		gotID, gotKind, body, err := readFrame(bufio.NewReader(bytes.NewReader(appendFrame(nil, id, kind, data))))
		if err != nil || gotID != id || gotKind != kind || !bytes.Equal(body, data) {
			t.Fatalf("round trip: %d %d %q %v", gotID, gotKind, body, err)
		}
	})
}

// FuzzBatchDecoding: the server decodes any batch body a peer sends
// (protocol 2 and the framed channel) without panicking; unknown drives
// are answered per item.
func FuzzBatchDecoding(f *testing.F) {
	put := binaryUvarint(1)
	for _, s := range []string{"/data0", "bk", "obj"} {
		put = appendString(put, s)
	}
	put = appendBytes(put, make([]byte, 16))
	put = appendBytes(put, drive.MarshalRecord(nil, &drive.Record{ModTime: 1, ETag: "e"}))
	f.Add(put)
	get := binaryUvarint(1)
	for _, s := range []string{"/data0", "bk", "obj"} {
		get = appendString(get, s)
	}
	f.Add(append(get, 0))
	f.Add(append(append(get, 1), appendBytes(nil, make([]byte, 16))...))
	f.Add(binaryUvarint(1 << 40))
	s := &Server{Drive: func(string) *drive.Local { return nil }}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = s.batchPut(t.Context(), nil, body)
		_, _ = s.batchGet(t.Context(), nil, body)
		_, _ = s.batchStat(t.Context(), nil, body)
		_ = s.shardReadFrame(t.Context(), 1, body)
	})
}

// FuzzAnswers: the answers a peer sends (walk pages, records) decode or
// fail, never panic.
func FuzzAnswers(f *testing.F) {
	page, _ := walkAnswer.encode([]walkEntry{{"a", []*drive.Record{{ModTime: 1}}}, {"b/c", nil}})
	f.Add(page)
	rec, _ := recordAnswer.encode(&drive.Record{ModTime: 2, ETag: "x", Meta: map[string]string{"k": "v"}})
	f.Add(rec)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = walkAnswer.decode(b)
		_, _ = recordAnswer.decode(b)
		_, _ = versionsAnswer.decode(b)
	})
}
