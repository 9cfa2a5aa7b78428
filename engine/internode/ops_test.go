package internode

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/strata-storage/strata/engine/drive"
)

// TestWireFormat pins what each operation's request carries on the wire.
// Nodes of the previous builds (N-1, N-2) send and expect these names: a
// request field renamed or an operation renamed breaks a rolling upgrade,
// so changing this table means a new protocol version.
func TestWireFormat(t *testing.T) {
	jsonOps := map[string][]string{
		"format":          nil,
		"diskinfo":        nil,
		"makebucket":      {"BucketInfo"},
		"setbucket":       {"BucketInfo"},
		"statbucket":      {"Bucket"},
		"bucketusage":     {"Bucket"}, // added: older nodes refuse it, and a quota check reads the newer nodes' drives
		"listbuckets":     nil,
		"deletebucket":    {"Bucket", "Force"},
		"versions":        {"Bucket", "Object"},
		"setversionmeta":  {"Bucket", "Object", "Record", "Meta"},
		"deleteversion":   {"Bucket", "Object", "VersionID"},
		"rollbackversion": {"Bucket", "Object", "Record", "EventID"}, // EventID added (eventsProtocol): older nodes ignore it and stored no events
		"listevents":      {"After", "Limit"},                        // added (eventsProtocol): older nodes refuse it, and their drives hold no events
		"deleteevents":    {"IDs"},
		"walkobjects":     {"Bucket", "Prefix", "After", "LatestOnly", "Limit", "Delimiter"}, // Delimiter added: older nodes ignore it and walk every key
		"abortstaged":     {"VersionID"},
		"putupload":       {"Upload"},
		"getupload":       {"Bucket", "Object", "VersionID"},
		"walkuploads":     {"Bucket", "Prefix", "After", "Limit"}, // After, Limit added: older nodes ignore them and answer all
		"commitpart":      {"Upload", "Part"},
		"listparts":       {"VersionID"},
		"completeupload":  {"Upload", "Chosen", "Record"},
		"reopenupload":    {"Upload", "Chosen", "Record"},
		"abortupload":     {"Bucket", "Object", "VersionID"},
	}
	otherOps := []string{"putversion", "getversion", "shard/write", "shard/read", "shard/stat"}
	for name, o := range driveOps {
		want, isJSON := jsonOps[name]
		if !isJSON {
			if !slices.Contains(otherOps, name) {
				t.Errorf("operation %q is not in the wire table", name)
			}
			continue
		}
		w, ok := o.(interface{ wireFields() []string })
		if !ok {
			t.Errorf("%s: no longer a JSON operation", name)
			continue
		}
		if got := w.wireFields(); !slices.Equal(got, want) {
			t.Errorf("%s sends %v, the wire has %v", name, got, want)
		}
	}
	if len(driveOps) != len(jsonOps)+len(otherOps) {
		t.Errorf("%d drive operations, the wire has %d", len(driveOps), len(jsonOps)+len(otherOps))
	}
	var nodes []string
	for name := range nodeOps {
		nodes = append(nodes, name)
	}
	slices.Sort(nodes)
	if want := []string{"batch/get", "batch/put", "batch/putevents", "batch/stat", "bucketchanged", "frames", "nodestatus", "ping", "poolstate"}; !slices.Equal(nodes, want) {
		t.Errorf("node operations %v, the wire has %v", nodes, want)
	}
}

// TestBatchCountsAreBounded: a batch naming more items than its body can
// hold is refused as malformed, not allocated (a count of 2^40 would
// otherwise take the process down).
func TestBatchCountsAreBounded(t *testing.T) {
	s := &Server{Drive: func(string) *drive.Local { return nil }}
	for name, run := range map[string]batchFunc{"put": s.batchPut, "putevents": s.batchPutEvents, "get": s.batchGet, "stat": s.batchStat} {
		for _, n := range []uint64{1 << 40, 1 << 62, 3} {
			body := binary.AppendUvarint(nil, n)
			body = append(body, 1, 2) // two bytes: room for no item
			if _, err := run(t.Context(), nil, body); err == nil {
				t.Errorf("batch %s of %d items in 2 bytes: accepted", name, n)
			}
		}
	}
}
