package posix

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// On-volume layout (the gateway's since its first release, shared with
// versitygw's posix backend; docs/gateway.md):
//
//	<root>/<bucket>/...            buckets and objects, plain files
//	<root>/<bucket>/.sgwtmp/       staging: temp files, multipart uploads
//	<root>/.vgwlocks/              publish locks, one file per key shard
//	<root>/.strata/gateway.json    format marker: metadata mode, deployment ID
//	<root>/.strata/versions/       older versions of objects (default)
//	<root>/.strata/meta/           sidecar metadata (filesystems without user xattrs)
//	<root>/.strata/locks/          bucket record locks (ours)
//
// Names starting with '.' are not valid bucket names, so none of these is
// reachable through S3.
const (
	hiddenDir   = ".strata"
	markerFile  = "gateway.json"
	versionsDir = "versions"
	sidecarDir  = "meta"
	locksDir    = "locks"
	stagingDir  = ".sgwtmp"
	uploadsDir  = stagingDir + "/multipart"
	publishDir  = ".vgwlocks"

	markerMagic   = "strata-gateway"
	markerVersion = 1
)

// procCwd is how the gateway named a versions directory below the root to
// versitygw's posix backend (which refused directories below the root by
// comparing path strings): "/proc/self/cwd/<relative>", the backend having
// made the root its working directory. The sidecar store keeps a version's
// attributes under <sidecar>/<that path>, so the literal component stays
// part of every version's sidecar path on existing volumes.
const procCwd = "proc/self/cwd"

// MetadataMode is where object metadata lives.
type MetadataMode string

// Metadata modes. Auto picks xattr when the filesystem stores user
// extended attributes, sidecar otherwise; the choice is made once per
// volume and kept in its marker.
const (
	MetadataAuto    MetadataMode = "auto"
	MetadataXattr   MetadataMode = "xattr"
	MetadataSidecar MetadataMode = "sidecar"
)

// marker is <root>/.strata/gateway.json. Written once by the first gateway
// to start on a volume; every later one (any replica, any release) reads
// it, so all of them keep metadata in the same place even if detection
// would now answer differently.
type marker struct {
	Format       string       `json:"format"`
	Version      int          `json:"version"`
	DeploymentID string       `json:"deploymentID"`
	Metadata     MetadataMode `json:"metadata"`
}

// layout is the resolved layout of a volume.
type layout struct {
	root     string // absolute
	metadata MetadataMode
	id       string
	detected bool   // metadata mode chosen now (first start), not read from the marker
	why      string // why xattrs were not usable, when detected as sidecar
}

// probeXattrs tests whether user xattrs can be stored in dir: a read (what
// a filesystem without them refuses with ENOTSUP) and a real store on a
// temp file (some filesystems read fine and refuse writes).
func probeXattrs(dir string) error {
	if _, err := unix.Getxattr(dir, "user.test", nil); errors.Is(err, unix.ENOTSUP) {
		return errors.New("xattrs are not supported on this filesystem")
	}
	f, err := os.CreateTemp(dir, ".xattr-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := unix.Fsetxattr(int(f.Fd()), "user.strata.probe", []byte("1"), 0); err != nil {
		return fmt.Errorf("storing a user xattr: %w", err)
	}
	return nil
}

// prepareLayout creates the hidden directory and the marker on a fresh
// volume, or reads the marker of a used one. want is the operator's
// choice; an explicit choice that contradicts the marker is refused, since
// metadata already written would be lost from sight.
func prepareLayout(root string, want MetadataMode, probe func(dir string) error) (*layout, error) {
	if want == "" {
		want = MetadataAuto
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s is not a directory", abs)
	}
	switch want {
	case MetadataAuto, MetadataXattr, MetadataSidecar:
	default:
		return nil, fmt.Errorf("metadata mode %q: want auto, xattr or sidecar", want)
	}
	hidden := filepath.Join(abs, hiddenDir)
	for _, d := range []string{hidden, filepath.Join(hidden, versionsDir)} {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("preparing %s: %w", d, err)
		}
	}
	l := &layout{root: abs}
	m, err := readMarker(hidden)
	if errors.Is(err, os.ErrNotExist) {
		m, err = l.createMarker(hidden, want, probe)
	}
	if err != nil {
		return nil, err
	}
	if want != MetadataAuto && want != m.Metadata {
		return nil, fmt.Errorf("metadata mode %s: this volume keeps its metadata as %s since it was first served (%s)",
			want, m.Metadata, filepath.Join(hidden, markerFile))
	}
	l.metadata, l.id = m.Metadata, m.DeploymentID
	if l.metadata == MetadataSidecar {
		if err := os.Mkdir(filepath.Join(hidden, sidecarDir), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("preparing the sidecar directory: %w", err)
		}
	}
	return l, nil
}

func readMarker(hidden string) (marker, error) {
	var m marker
	path := filepath.Join(hidden, markerFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case m.Format != markerMagic:
		return m, fmt.Errorf("%s: not a strata gateway marker", path)
	case m.Version > markerVersion:
		return m, fmt.Errorf("%s: format version %d is newer than this build reads (%d)", path, m.Version, markerVersion)
	case m.Metadata != MetadataXattr && m.Metadata != MetadataSidecar:
		return m, fmt.Errorf("%s: unknown metadata mode %q", path, m.Metadata)
	}
	return m, nil
}

// createMarker decides the metadata mode and publishes the marker with a
// hard link, which fails if another replica published one first: then
// that one is read and wins.
func (l *layout) createMarker(hidden string, want MetadataMode, probe func(string) error) (marker, error) {
	mode := want
	if want != MetadataSidecar {
		if err := probe(hidden); err != nil {
			if want == MetadataXattr {
				return marker{}, fmt.Errorf("metadata mode xattr: the filesystem of %s does not store user xattrs: %w", l.root, err)
			}
			mode, l.why = MetadataSidecar, err.Error()
		} else {
			mode = MetadataXattr
		}
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	m := marker{Format: markerMagic, Version: markerVersion, DeploymentID: hex.EncodeToString(id), Metadata: mode}
	b, _ := json.MarshalIndent(m, "", "  ")
	tmp, err := os.CreateTemp(hidden, markerFile+".tmp-")
	if err != nil {
		return marker{}, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return marker{}, err
	}
	err = os.Link(tmp.Name(), filepath.Join(hidden, markerFile))
	if errors.Is(err, os.ErrExist) {
		return readMarker(hidden)
	}
	if err != nil {
		return marker{}, fmt.Errorf("writing %s: %w", filepath.Join(hidden, markerFile), err)
	}
	l.detected = true
	return m, nil
}

// versionsSidecarPath is the path under the sidecar directory that holds
// the attributes of the versions in versions (absolute): what the gateway
// handed versitygw for it, without the leading '/' (the sidecar store
// joins it below its own directory). A directory below the root was
// handed as /proc/self/cwd/<relative>, any other as itself.
func versionsSidecarPath(root, versions string) string {
	rel, err := filepath.Rel(root, versions)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return strings.TrimPrefix(versions, "/")
	}
	return procCwd + "/" + rel
}
