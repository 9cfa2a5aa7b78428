package s3api

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDataSlots(t *testing.T) {
	s := New(nil, Config{DataSlots: 2, DataSlotWait: 50 * time.Millisecond})
	r := &request{s: s, ctx: context.Background()}
	var releases []func()
	for range 2 {
		release, err := r.dataSlot(16 << 20)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if release, err := r.dataSlot(dataSlotFloor); err != nil {
		t.Fatalf("a small request waited for a slot: %v", err)
	} else {
		release()
	}
	start := time.Now()
	if _, err := r.dataSlot(-1); !errors.Is(err, errNoDataSlot) {
		t.Fatalf("a large request of unknown size with no slot free: %v, want SlowDown", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("refused after %s, before DataSlotWait", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&request{s: s, ctx: ctx}).dataSlot(2 << 20); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose client left: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		release, err := r.dataSlot(2 << 20)
		if err == nil {
			release()
		}
		got <- err
	}()
	releases[0]()
	if err := <-got; err != nil {
		t.Errorf("a slot given back was not taken: %v", err)
	}
	releases[1]()
	if unbounded := New(nil, Config{}); unbounded.slots != nil {
		t.Error("no DataSlots: a bound anyway")
	}
}
