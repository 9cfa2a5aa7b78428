package main

import (
	"fmt"
	"strings"
	"time"

	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/strata-storage/strata/engine/vfs"
	"github.com/strata-storage/strata/engine/vfs/faultfs"
)

// slowWrites builds the drives' filesystem seams for STRATA_TEST_SLOW_WRITES
// ("<delay>:<path>", only for tests of slow drives): every write and sync
// of a file or directory whose path contains path (shard files and the
// metadata store alike) takes delay longer, as on a disk that answers,
// but slowly. Empty: no seams (nil). Drives behind them write shards
// through the page cache (faultfs does not do O_DIRECT).
func slowWrites(v string) (vfs.FS, pebblevfs.FS, error) {
	if v == "" {
		return nil, nil, nil
	}
	d, path, ok := strings.Cut(v, ":")
	delay, err := time.ParseDuration(d)
	if !ok || err != nil || delay <= 0 || path == "" {
		return nil, nil, fmt.Errorf("STRATA_TEST_SLOW_WRITES=%q: want <delay>:<path>, e.g. 2s:/data/d1/", v)
	}
	fsys := faultfs.New(vfs.Default)
	for _, op := range []faultfs.Op{faultfs.OpWrite, faultfs.OpSync, faultfs.OpSyncDir} {
		fsys.Delay(op, path, delay, -1)
	}
	return fsys, errorfs.Wrap(pebblevfs.Default, fsys.MetaInjector()), nil
}
