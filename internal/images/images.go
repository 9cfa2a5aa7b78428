// Package images builds the two container images of a release, strata
// (the engine) and strata-operator, without a container daemon: a base
// layer this package assembles (users, CA certificates, /tmp, nothing
// else) and one layer holding the static binary. The same inputs give the
// same digests: file times are the release's creation time, file order is
// fixed, and gzip writes no timestamps.
//
// The Dockerfile builds the same images where a daemon exists;
// TestDockerfileAgrees keeps the two in step.
package images

import (
	"archive/tar"
	"bytes"
	"cmp"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"

	"github.com/strata-storage/strata/engine/buildinfo"
)

// RefAnnotation names an image in an OCI layout's index: its full
// reference, e.g. ghcr.io/strata-storage/strata:0.1.0.
const RefAnnotation = "org.opencontainers.image.ref.name"

// UID and GID the images run as (distroless' "nonroot").
const (
	UID = 65532
	GID = 65532
)

// Spec describes one image.
type Spec struct {
	// Name is the repository's last element: "strata" or "strata-operator".
	Name string
	// Repository is the full repository, without tag.
	Repository string
	// Entrypoint is where the binary lives in the image and what runs.
	Entrypoint string
	// Ports are the TCP ports the image documents (EXPOSE).
	Ports []int
	// Title and Description are the OCI annotation labels.
	Title, Description string
	// User is "uid:gid" the image runs as; empty: UID:GID.
	User string
	// WorkingDir is the image's working directory; empty: "/".
	WorkingDir string
	// Source is the org.opencontainers.image.source label; empty: this
	// repository (buildinfo.Source).
	Source string
}

// Specs are the release's images; the names and repositories come from
// hack/release.env through buildinfo.
var Specs = []Spec{
	{
		Name: "strata", Repository: buildinfo.EngineRepository, Entrypoint: "/strata",
		Ports: []int{9000},
		Title: "strata", Description: "Strata storage engine: erasure-coded S3 server and S3-to-POSIX gateway",
	},
	{
		Name: "strata-operator", Repository: buildinfo.OperatorRepository, Entrypoint: "/manager",
		Ports: []int{8081, 8443, 9443},
		Title: "strata-operator", Description: "Strata Kubernetes operator (Tenant, ServerPool, GatewayPool)",
	},
}

// SpecNamed returns the spec of an image by name.
func SpecNamed(name string) (Spec, bool) {
	for _, s := range Specs {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// BinaryImage is an image of one static binary that is not part of the
// release, under a reference of the caller's choosing: the local cluster
// runs prometheus-operator and Prometheus so, under the references
// prometheus-operator names in the pods it creates. It has the release
// images' base and layout; only the binary, its place and the user differ.
type BinaryImage struct {
	Ref        string // repository and tag: quay.io/prometheus/prometheus:v3.5.0
	Entrypoint string // where the binary goes, and what runs: /bin/prometheus
	User       string // "uid:gid"; empty: UID:GID
	WorkingDir string // empty: "/"
	Source     string // the source label: the binary's upstream
}

// Spec is the image's spec and the build whose version is the tag, so
// that spec.Ref(build) is bi.Ref.
func (bi BinaryImage) Spec(created time.Time) (Spec, Build, error) {
	tag, err := name.NewTag(bi.Ref, name.StrictValidation)
	if err != nil {
		return Spec{}, Build{}, fmt.Errorf("image reference %q: %w (want repository:tag)", bi.Ref, err)
	}
	if !strings.HasPrefix(bi.Entrypoint, "/") {
		return Spec{}, Build{}, fmt.Errorf("entrypoint %q is not an absolute path", bi.Entrypoint)
	}
	repo := tag.Context().Name()
	short := path.Base(tag.RepositoryStr())
	s := Spec{
		Name: short, Repository: repo, Entrypoint: bi.Entrypoint,
		Title: short, Description: short + ", packaged by strata's image builder",
		User: bi.User, WorkingDir: bi.WorkingDir, Source: bi.Source,
	}
	return s, Build{Version: tag.TagStr(), Revision: tag.TagStr(), Created: created}, nil
}

// Build is what varies between builds of one release.
type Build struct {
	Version  string    // image tag and org.opencontainers.image.version
	Revision string    // source commit, org.opencontainers.image.revision
	Created  time.Time // commit time: file times and the config's creation time
}

// Ref is the image's reference for a build.
func (s Spec) Ref(b Build) string { return s.Repository + ":" + b.Version }

// Labels are the image's OCI labels; the Dockerfile sets the same.
func (s Spec) Labels(b Build) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       s.Title,
		"org.opencontainers.image.description": s.Description,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Revision,
		"org.opencontainers.image.source":      cmp.Or(s.Source, buildinfo.Source),
	}
}

// Config is the image's runtime configuration.
func (s Spec) Config(b Build) v1.Config {
	ports := map[string]struct{}{}
	for _, p := range s.Ports {
		ports[strconv.Itoa(p)+"/tcp"] = struct{}{}
	}
	return v1.Config{
		Entrypoint:   []string{s.Entrypoint},
		User:         cmp.Or(s.User, fmt.Sprintf("%d:%d", UID, GID)),
		WorkingDir:   cmp.Or(s.WorkingDir, "/"),
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		ExposedPorts: ports,
		Labels:       s.Labels(b),
	}
}

// Image assembles the image from the binary at path.
func (s Spec) Image(b Build, binary string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	base, err := layer(baseFiles(), b.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	app, err := layer(binaryFiles(s.Entrypoint, bin), b.Created)
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: b.Created}, CreatedBy: "strata images: base (users, CA certificates, /tmp)", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: b.Created}, CreatedBy: "strata images: " + s.Entrypoint, Comment: s.Name}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: b.Created}
	cf.Config = s.Config(b)
	return mutate.ConfigFile(img, cf)
}

// binaryFiles are the binary layer's entries: the binary at entrypoint,
// after its parent directories (/bin/prometheus needs /bin).
func binaryFiles(entrypoint string, bin []byte) []file {
	rel := strings.TrimPrefix(path.Clean(entrypoint), "/")
	var out []file
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		out = append(out, file{path: d, dir: true, mode: 0o755})
	}
	return append(out, file{path: rel, mode: 0o755, data: bin})
}

// file is one entry of a layer: a directory when data is nil and dir set.
type file struct {
	path     string
	mode     int64
	dir      bool
	uid, gid int
	data     []byte
}

// baseFiles are the base layer's entries: what a static Go binary running
// as a non-root user needs, and nothing else (no shell, no package
// manager).
func baseFiles() []file {
	return []file{
		{path: "etc", dir: true, mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/ssl", dir: true, mode: 0o755},
		{path: "etc/ssl/certs", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: CACertificates()},
		{path: "home", dir: true, mode: 0o755},
		{path: "home/nonroot", dir: true, mode: 0o700, uid: UID, gid: GID},
		{path: "root", dir: true, mode: 0o700},
		{path: "tmp", dir: true, mode: 0o1777},
	}
}

// WriteBase writes the base layer's files into dir (the Dockerfile's base
// stage copies them), owners left to the caller.
func WriteBase(dir string) error {
	for _, f := range baseFiles() {
		p := filepath.Join(dir, f.path)
		if f.dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
		if err := os.Chmod(p, fileMode(f.mode)); err != nil {
			return err
		}
	}
	return nil
}

func fileMode(m int64) os.FileMode {
	return os.FileMode(m).Perm() | tarSpecialBits(m)
}

// CACertificates is the PEM bundle of the Mozilla (NSS) roots as packaged
// by golang.org/x/crypto/x509roots/fallback at the version go.mod pins, so
// the bundle changes only when that pin does. Roots NSS constrains (a
// distrust date) are left out: a PEM file cannot carry the constraint.
func CACertificates() []byte {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return buf.Bytes()
}

// layer writes files, parents first, into a gzip'd tar with fixed times
// and owners.
func layer(files []file, created time.Time) (v1.Layer, error) {
	sort.SliceStable(files, func(i, j int) bool { return files[i].path < files[j].path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: created, Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.path+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
