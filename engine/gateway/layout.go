package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/xattr"
	"github.com/versity/versitygw/backend/meta"
)

// On-volume layout (docs/gateway.md):
//
//	<root>/<bucket>/...            buckets and objects, plain files
//	<root>/<bucket>/.sgwtmp/       multipart staging (posix backend)
//	<root>/.vgwlocks/              publish locks (posix backend)
//	<root>/.strata/gateway.json    format marker: metadata mode, deployment ID
//	<root>/.strata/versions/       older versions of objects (default)
//	<root>/.strata/meta/           sidecar metadata (filesystems without user xattrs)
//
// Names starting with '.' are not valid bucket names, so none of these is
// reachable through S3.
const (
	hiddenDir   = ".strata"
	markerFile  = "gateway.json"
	versionsDir = "versions"
	sidecarDir  = "meta"

	markerMagic   = "strata-gateway"
	markerVersion = 1
)

// MetadataMode is where object metadata lives.
type MetadataMode string

// Metadata modes. Auto picks xattr when the filesystem stores user
// extended attributes, sidecar otherwise.
const (
	MetadataAuto    MetadataMode = "auto"
	MetadataXattr   MetadataMode = "xattr"
	MetadataSidecar MetadataMode = "sidecar"
)

// marker is <root>/.strata/gateway.json. Written once by the first gateway
// to start on a volume; every later one (any replica) reads it, so all of
// them keep metadata in the same place even if detection would now answer
// differently.
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

// probeXattrs tests whether user xattrs can be stored in dir.
func probeXattrs(dir string) error {
	if err := (meta.XattrMeta{}).Test(dir); err != nil {
		return err
	}
	// Test only reads; some filesystems read fine and refuse writes.
	f, err := os.CreateTemp(dir, ".xattr-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := xattr.FSet(f, "user.strata.probe", []byte("1")); err != nil {
		return fmt.Errorf("storing a user xattr: %w", err)
	}
	return nil
}

// prepareLayout creates the hidden directory and the marker on a fresh
// volume, or reads the marker of a used one. want is the operator's
// choice; an explicit choice that contradicts the marker is refused, since
// metadata already written would be lost from sight. probe tests for user
// xattrs (probeXattrs; tests simulate filesystems without them).
func prepareLayout(root string, want MetadataMode, probe func(dir string) error) (*layout, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("--root %s is not a directory", abs)
	}
	switch want {
	case MetadataAuto, MetadataXattr, MetadataSidecar:
	default:
		return nil, fmt.Errorf("--metadata %q: want auto, xattr or sidecar", want)
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
		return nil, fmt.Errorf("--metadata %s: this volume keeps its metadata as %s since it was first served (%s); "+
			"serve it with --metadata %s or auto", want, m.Metadata, filepath.Join(hidden, markerFile), m.Metadata)
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
	b, err := os.ReadFile(filepath.Join(hidden, markerFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(hidden, markerFile), err)
	}
	switch {
	case m.Format != markerMagic:
		return m, fmt.Errorf("%s: not a strata gateway marker", filepath.Join(hidden, markerFile))
	case m.Version > markerVersion:
		return m, fmt.Errorf("%s: format version %d is newer than this build reads (%d)", filepath.Join(hidden, markerFile), m.Version, markerVersion)
	case m.Metadata != MetadataXattr && m.Metadata != MetadataSidecar:
		return m, fmt.Errorf("%s: unknown metadata mode %q", filepath.Join(hidden, markerFile), m.Metadata)
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
				return marker{}, fmt.Errorf("--metadata xattr: the filesystem of %s does not store user xattrs: %w", l.root, err)
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
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return marker{}, err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return marker{}, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return marker{}, err
	}
	tmp.Close()
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

// procCwd names the process's working directory through procfs. The posix
// backend changes into the root and refuses a versions or sidecar
// directory below it (it compares path strings); naming the hidden
// directory through the working directory keeps it on the volume, the same
// path string on every replica, and accepted.
const procCwd = "/proc/self/cwd"

// backendPath is how the posix backend must be told about dir: through
// procCwd when dir is below the root, as it is otherwise.
func (l *layout) backendPath(dir string) string {
	rel, err := filepath.Rel(l.root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return dir
	}
	return procCwd + "/" + rel
}
