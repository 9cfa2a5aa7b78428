// Package buildinfo carries the version stamped into the strata and manager
// binaries at link time (-X .../buildinfo.Version=...).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
)

// Version and Commit are set with -ldflags -X at build time; a build
// without them reports the release of hack/release.env.
var (
	Version = Release
	Commit  = ""
)

// EngineImage is the strata image of this build's version: what the
// operator runs for Tenants that do not name an image.
func EngineImage() string { return EngineRepository + ":" + Version }

// The internode protocol this build speaks (engine/internode takes its
// versions from here, so what `strata version` prints is what the wire
// carries): a server serves every version from MinProtocolVersion to
// ProtocolVersion, so builds two versions apart interoperate during a
// rolling upgrade.
const (
	ProtocolVersion    = 6
	MinProtocolVersion = 1
)

// speakProtocol, set with -X .../buildinfo.speakProtocol=N, makes a binary
// speak an older protocol than ProtocolVersion: it stands in for a previous
// release in upgrade tests (test/localcluster's day-2 test rolls a cluster
// between such a build and this one).
var speakProtocol string

// Protocol is the internode protocol this binary speaks: ProtocolVersion,
// or the older version the build was linked to speak.
func Protocol() int {
	if p, err := strconv.Atoi(speakProtocol); err == nil && p >= MinProtocolVersion && p < ProtocolVersion {
		return p
	}
	return ProtocolVersion
}

// String describes the build in one line.
func String() string {
	commit := Commit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, protocol %d, %s, %s/%s)",
		Version, commit, Protocol(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
