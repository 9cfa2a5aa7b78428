// Package testlayer gives tests of the engine's upper packages a real
// object layer: an erasure-coded pool of local drives in temporary
// directories, as `strata server` runs one.
package testlayer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/strata-storage/strata/engine/drive"
	"github.com/strata-storage/strata/engine/erasure"
	"github.com/strata-storage/strata/engine/objlayer"
)

// Erasure is one pool of one set of n drives with the given parity, and
// the drives' directories (closed when the test ends).
func Erasure(t testing.TB, n, parity int) (objlayer.Layer, []string) {
	t.Helper()
	var ds []erasure.Drive
	var roots []string
	for i := range n {
		root := filepath.Join(t.TempDir(), fmt.Sprintf("d%d", i))
		d, err := drive.OpenLocal(root, drive.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		ds = append(ds, d)
		roots = append(roots, root)
	}
	set, err := erasure.NewSet(ds, parity)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := erasure.NewPool(uuid.New(), []*erasure.Set{set})
	if err != nil {
		t.Fatal(err)
	}
	return erasure.Layer{Pools: erasure.NewPools(erasure.NewPoolEntry("pool-0", pool, erasure.StateActive))}, roots
}
