//go:build !linux

package s3front

import "net"

// Elsewhere than Linux a client that goes away is noticed when the answer
// is written, not before.
func watchable(net.Conn) bool  { return false }
func clientGone(net.Conn) bool { return false }
