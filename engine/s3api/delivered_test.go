package s3api

import "testing"

// TestDeliveredEventsBounded: an event found gone is remembered for at
// least a generation of others, and the memory is bounded by two.
func TestDeliveredEventsBounded(t *testing.T) {
	var d deliveredEvents
	id := func(n int) (b [16]byte) {
		b[0], b[1], b[2] = byte(n), byte(n>>8), byte(n>>16)
		return b
	}
	d.add(id(0))
	for n := 1; n < deliveredGeneration; n++ {
		d.add(id(n))
	}
	if !d.has(id(0)) {
		t.Fatal("the first event is forgotten within one generation")
	}
	for n := deliveredGeneration; n < 2*deliveredGeneration; n++ {
		d.add(id(n))
	}
	if !d.has(id(0)) || !d.has(id(2*deliveredGeneration-1)) {
		t.Fatal("events of the last two generations are forgotten")
	}
	d.add(id(2 * deliveredGeneration))
	if d.has(id(0)) {
		t.Fatal("an event three generations old is still held")
	}
	if d.has(id(3 * deliveredGeneration)) {
		t.Fatal("an event never added is held")
	}
	if n := len(d.cur) + len(d.prev); n > 2*deliveredGeneration {
		t.Fatalf("%d events held, at most %d", n, 2*deliveredGeneration)
	}
}
