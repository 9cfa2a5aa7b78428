package buildinfo

import (
	"strings"
	"testing"
)

func TestProtocolSpokenByABuildLinkedForAnOlderOne(t *testing.T) {
	defer func(v string) { speakProtocol = v }(speakProtocol)
	for _, c := range []struct {
		linked string
		want   int
	}{
		{"", ProtocolVersion},
		{"3", 3},
		{"1", 1},
		{"0", ProtocolVersion},     // below the oldest served
		{"99", ProtocolVersion},    // a build never speaks past its own
		{"three", ProtocolVersion}, // not a number
	} {
		speakProtocol = c.linked
		if got := Protocol(); got != c.want {
			t.Errorf("linked to speak %q: speaks %d, want %d", c.linked, got, c.want)
		}
	}
	speakProtocol = "3"
	if !strings.Contains(String(), "protocol 3,") {
		t.Errorf("String() does not print the protocol spoken: %s", String())
	}
}
