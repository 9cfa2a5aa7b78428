package s3http

import "sync/atomic"

// Stats is a snapshot of the server's connections and of what it cut off or
// refused, for the caller to export as metrics. Counts of connections are
// current; the other fields count events since the Server was made.
type Stats struct {
	// Open connections by phase.
	Handshaking    int
	AwaitingHeader int
	Serving        int
	Idle           int

	// InFlight is the number of S3 requests inside the handler (routes are
	// not counted).
	InFlight int

	// Accepted counts connections admitted.
	Accepted uint64
	// ShedAtLimit counts connections closed to admit a new one with
	// MaxConnections open.
	ShedAtLimit uint64
	// ShedNoDescriptors counts connections closed because accept ran out of
	// file descriptors (EMFILE/ENFILE).
	ShedNoDescriptors uint64
	// RejectedAtLimit counts new connections closed at once because
	// MaxConnections were open and all of them were being served.
	RejectedAtLimit uint64

	// HeaderTimeouts counts connections closed for not sending a whole
	// request header within HeaderTimeout.
	HeaderTimeouts uint64
	// IdleTimeouts counts keep-alive connections closed after IdleTimeout.
	IdleTimeouts uint64
	// HandshakeTimeouts counts TLS handshakes cut off by
	// TLSHandshakeTimeout; HandshakeErrors counts other failed handshakes.
	HandshakeTimeouts uint64
	HandshakeErrors   uint64

	// SlowBodies counts request bodies cut off with ErrBodyTooSlow.
	SlowBodies uint64
	// WriteStalls counts responses whose write made no progress for
	// WriteStall.
	WriteStalls uint64

	// RefusedServerBusy and RefusedClientBusy count requests answered
	// through Refuse for MaxRequests and MaxRequestsPerClient.
	RefusedServerBusy uint64
	RefusedClientBusy uint64
}

// counters are the event counts behind Stats, shared by the listener, the
// tracker and the request path.
type counters struct {
	accepted          atomic.Uint64
	shedAtLimit       atomic.Uint64
	shedNoDescriptors atomic.Uint64
	rejectedAtLimit   atomic.Uint64
	headerTimeouts    atomic.Uint64
	idleTimeouts      atomic.Uint64
	handshakeTimeouts atomic.Uint64
	handshakeErrors   atomic.Uint64
	slowBodies        atomic.Uint64
	writeStalls       atomic.Uint64
	refusedServer     atomic.Uint64
	refusedClient     atomic.Uint64
}

func (c *counters) fill(s *Stats) {
	s.Accepted = c.accepted.Load()
	s.ShedAtLimit = c.shedAtLimit.Load()
	s.ShedNoDescriptors = c.shedNoDescriptors.Load()
	s.RejectedAtLimit = c.rejectedAtLimit.Load()
	s.HeaderTimeouts = c.headerTimeouts.Load()
	s.IdleTimeouts = c.idleTimeouts.Load()
	s.HandshakeTimeouts = c.handshakeTimeouts.Load()
	s.HandshakeErrors = c.handshakeErrors.Load()
	s.SlowBodies = c.slowBodies.Load()
	s.WriteStalls = c.writeStalls.Load()
	s.RefusedServerBusy = c.refusedServer.Load()
	s.RefusedClientBusy = c.refusedClient.Load()
}
