package drive

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestCallsRacingCloseAnswerErrClosed: reads, writes, deletes and walks
// still running as the drive closes (a drive's late answer after its set
// had quorum, a background job stopping) answer ErrClosed, and none
// reaches the closed metadata store (pebble panics on that).
func TestCallsRacingCloseAnswerErrClosed(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	putSmallObjects(t, d, 200)
	inline := make([]byte, 2048)
	calls := map[string]func(i int) error{
		"get": func(i int) error {
			_, err := d.GetVersion(t.Context(), "bk", fmt.Sprintf("o%06d", i%200), nil)
			return err
		},
		"put": func(i int) error {
			_, err := d.PutVersion(t.Context(), "bk", fmt.Sprintf("n%06d", i), &Record{ModTime: int64(i + 1), Size: 4096, ETag: "e", Inline: inline}, NotStaged)
			return err
		},
		"delete": func(i int) error {
			rec, err := d.GetVersion(t.Context(), "bk", fmt.Sprintf("n%06d", i/2), nil)
			if errors.Is(err, ErrVersionNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			_, err = d.DeleteVersion(t.Context(), "bk", fmt.Sprintf("n%06d", i/2), rec.VersionID)
			return err
		},
		"walk": func(int) error {
			return d.WalkObjects(t.Context(), "bk", "", "", true, func(string, []*Record) bool { return true })
		},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(calls))
	counts := make(chan int, len(calls))
	for name, call := range calls {
		wg.Go(func() {
			for i := 0; ; i++ {
				if err := call(i); errors.Is(err, ErrClosed) {
					counts <- i
					return
				} else if err != nil {
					errs <- fmt.Errorf("%s #%d: %w, want nil or ErrClosed", name, i, err)
					return
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatalf("Close with calls in flight: %v", err)
	}
	wg.Wait()
	close(errs)
	close(counts)
	for err := range errs {
		t.Error(err)
	}
	for n := range counts {
		if n == 0 {
			t.Error("a caller made no call before the close; the race was not run")
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestCloseWaitsForAnOpenIterator: Close waits for an iterator open over
// the store (a walk in progress) before closing it.
func TestCloseWaitsForAnOpenIterator(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	putSmallObjects(t, d, 10)
	it, err := d.meta.NewIter(&pebble.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closed := closeWaiting(t, d, "an iterator was open")
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Error(); err != nil || n == 0 {
		t.Fatalf("the open iterator walked %d keys, err %v, while Close waited", n, err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close after the iterator closed: %v", err)
	}
	if _, err := d.GetVersion(t.Context(), "bk", "o000000", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetVersion after Close: %v, want ErrClosed", err)
	}
}

// TestCloseWaitsForAReadValue: a value read with Get holds the store open
// until its closer is closed (pebble's closer holds the store's state).
func TestCloseWaitsForAReadValue(t *testing.T) {
	d := openTestDrive(t, t.TempDir(), nil)
	putSmallObjects(t, d, 1)
	v, closer, err := d.meta.Get(objectKey("bk", "o000000"))
	if err != nil {
		t.Fatal(err)
	}
	closed := closeWaiting(t, d, "a read value was held")
	if len(v) == 0 {
		t.Fatal("empty value")
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closer.Close(); err != nil { // a second close is harmless
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close after the value was let go: %v", err)
	}
}

// TestCloseOfABusyStoreFinishesLater: a store still used after closeWait
// makes Close answer an error, and is closed once its last user leaves
// (its lock released: the drive opens again).
func TestCloseOfABusyStoreFinishesLater(t *testing.T) {
	defer func(w time.Duration) { closeWait = w }(closeWait)
	closeWait = 100 * time.Millisecond
	root := t.TempDir()
	d, err := OpenLocal(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	putSmallObjects(t, d, 1)
	it, err := d.meta.NewIter(&pebble.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err == nil {
		t.Fatal("Close answered nil with an iterator open")
	}
	if d.Online() {
		t.Fatal("a closed drive says it is online")
	}
	if _, err := OpenLocal(root, Options{}); err == nil {
		t.Fatal("the drive opened again while its store was still open")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	var d2 *Local
	deadline := time.Now().Add(5 * time.Second)
	for d2 == nil {
		if d2, err = OpenLocal(root, Options{}); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the drive does not open after its last user left: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	defer d2.Close()
	if _, err := d2.GetVersion(t.Context(), "bk", "o000000", nil); err != nil {
		t.Fatal(err)
	}
}

// closeWaiting closes d in the background and fails the test if Close
// returns within 200 ms (while what holds the store); Close's answer
// comes on the channel.
func closeWaiting(t *testing.T, d *Local, what string) <-chan error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while %s", err, what)
	case <-time.After(200 * time.Millisecond):
	}
	return closed
}
