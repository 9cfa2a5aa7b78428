package s3api

import (
	"time"

	"github.com/strata-storage/strata/engine/s3err"
)

// dataSlotFloor is the most object data a request moves without a data
// slot: what the erasure-coded server keeps inline in its records
// (erasure.DefaultInlineLimit), which moves no block buffer. Anything
// larger is striped through block and drive buffers (a 1 MiB PUT holds
// about as much as a 16 MiB one: memlimit.DataSlotBytes).
const dataSlotFloor = 128 << 10

// DefaultDataSlotWait is how long a request waits for a data slot before
// it is answered SlowDown.
const DefaultDataSlotWait = 15 * time.Second

// errNoDataSlot answers a request that found no data slot in time.
var errNoDataSlot = s3err.SlowDown.With("Please reduce your request rate: the server is moving as many large objects as its memory allows; retry shortly.")

// dataSlot waits for one of Config.DataSlots before a request moves size
// bytes of object data (size < 0: not known yet), so that the requests in
// flight never hold more buffers than the process's memory allows; a
// request that would wait longer than Config.DataSlotWait is refused with
// SlowDown, and one whose client goes away ends. The release func gives
// the slot back; requests of at most dataSlotFloor bytes take none.
func (r *request) dataSlot(size int64) (release func(), err error) {
	slots := r.s.slots
	if slots == nil || (size >= 0 && size <= dataSlotFloor) {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	default:
	}
	wait := time.NewTimer(r.s.cfg.DataSlotWait)
	defer wait.Stop()
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-r.ctx.Done():
		return nil, r.ctx.Err()
	case <-wait.C:
		return nil, errNoDataSlot
	}
}
