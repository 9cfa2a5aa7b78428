package posix

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strata-storage/strata/engine/objlayer"
)

// TestWritesBesideDeletesThatPrune: a PUT whose key directory a DELETE of
// a sibling key prunes (emptied) while the PUT makes its parents makes
// them again, rather than failing with ENOENT (the notification queue,
// writing and deleting its batches in one directory, hit it).
func TestWritesBesideDeletesThatPrune(t *testing.T) {
	l, _ := volume(t, MetadataXattr, "bucket")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			for i := range 300 {
				key := fmt.Sprintf("q/node/%d-%d", w, i)
				if _, err := l.PutObject(ctx, "bucket", key, strings.NewReader("x"), 1, objlayer.PutOptions{}); err != nil {
					errs <- fmt.Errorf("put %s: %w", key, err)
					return
				}
				if _, err := l.DeleteObject(ctx, "bucket", key, nil, objlayer.DeleteUnversioned); err != nil {
					errs <- fmt.Errorf("delete %s: %w", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
