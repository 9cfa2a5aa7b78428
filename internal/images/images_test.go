package images

import (
	"archive/tar"
	"bufio"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-storage/strata/engine/buildinfo"
)

var testBuild = Build{Version: "1.2.3", Revision: "abc1234", Created: time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)}

// fakeBinary stands in for a Go binary: the image does not care.
func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Same inputs, same digest; a different binary, a different digest.
func TestImagesAreReproducible(t *testing.T) {
	s, _ := SpecNamed("strata")
	digest := func(bin string, b Build) string {
		img, err := s.Image(b, bin)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	a := digest(fakeBinary(t, "one"), testBuild)
	if b := digest(fakeBinary(t, "one"), testBuild); a != b {
		t.Fatalf("two builds of the same inputs: %s and %s", a, b)
	}
	if c := digest(fakeBinary(t, "two"), testBuild); c == a {
		t.Fatal("a different binary gave the same digest")
	}
	later := testBuild
	later.Created = later.Created.Add(time.Hour)
	if d := digest(fakeBinary(t, "one"), later); d == a {
		t.Fatal("a different creation time gave the same digest")
	}
}

// The image holds the binary at its entrypoint and the base: users, CA
// certificates that parse, a sticky /tmp, a home owned by the image's user;
// nothing else.
func TestImageContents(t *testing.T) {
	s, _ := SpecNamed("strata-operator")
	img, err := s.Image(testBuild, fakeBinary(t, "#!manager"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; !slices.Equal(got, []string{"/manager"}) || cf.Config.User != "65532:65532" {
		t.Fatalf("entrypoint %v user %q", got, cf.Config.User)
	}
	if !cf.Created.Equal(testBuild.Created) || cf.Config.Labels["org.opencontainers.image.version"] != "1.2.3" ||
		cf.Config.Labels["org.opencontainers.image.revision"] != "abc1234" {
		t.Fatalf("created %v labels %v", cf.Created, cf.Config.Labels)
	}
	var names []string
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(h.Name, "/"))
		if !h.ModTime.Equal(testBuild.Created) {
			t.Errorf("%s: time %v", h.Name, h.ModTime)
		}
		switch h.Name {
		case "tmp/":
			if h.Mode != 0o1777 {
				t.Errorf("/tmp mode %o", h.Mode)
			}
		case "home/nonroot/":
			if h.Uid != UID || h.Gid != GID {
				t.Errorf("/home/nonroot owned by %d:%d", h.Uid, h.Gid)
			}
		case "manager":
			data, _ := io.ReadAll(tr)
			if string(data) != "#!manager" || h.Mode != 0o755 {
				t.Errorf("/manager: %q mode %o", data, h.Mode)
			}
		case "etc/ssl/certs/ca-certificates.crt":
			data, _ := io.ReadAll(tr)
			if n := countCerts(t, data); n < 100 {
				t.Errorf("only %d CA certificates", n)
			}
		}
	}
	want := []string{"etc", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl", "etc/ssl/certs",
		"etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "manager", "root", "tmp"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
}

// An image of another binary: under the reference asked for, with its
// entrypoint (parents included), user, working directory and source; the
// release's base under it.
func TestBinaryImage(t *testing.T) {
	bi := BinaryImage{
		Ref: "quay.io/prometheus/prometheus:v3.5.0", Entrypoint: "/bin/prometheus",
		User: "65534:65534", WorkingDir: "/prometheus", Source: "https://github.com/prometheus/prometheus",
	}
	s, b, err := bi.Spec(testBuild.Created)
	if err != nil {
		t.Fatal(err)
	}
	if s.Ref(b) != bi.Ref || s.Name != "prometheus" {
		t.Fatalf("ref %s name %s", s.Ref(b), s.Name)
	}
	img, err := s.Image(b, fakeBinary(t, "#!prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/bin/prometheus"}) || c.User != "65534:65534" || c.WorkingDir != "/prometheus" {
		t.Fatalf("entrypoint %v user %q workdir %q", c.Entrypoint, c.User, c.WorkingDir)
	}
	if c.Labels["org.opencontainers.image.source"] != bi.Source || c.Labels["org.opencontainers.image.version"] != "v3.5.0" {
		t.Fatalf("labels %v", c.Labels)
	}
	files := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h.Mode
	}
	if files["bin"] != 0o755 || files["bin/prometheus"] != 0o755 || files["etc/passwd"] == 0 {
		t.Fatalf("files %v", files)
	}

	for _, bad := range []BinaryImage{
		{Ref: "quay.io/prometheus/prometheus", Entrypoint: "/bin/prometheus"}, // no tag
		{Ref: "quay.io/prometheus/prometheus:v3.5.0", Entrypoint: "bin/prometheus"},
	} {
		if _, _, err := bad.Spec(testBuild.Created); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func countCerts(t *testing.T, data []byte) int {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return n
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Errorf("certificate %d: %v", n, err)
		}
		n++
	}
}

// An image written to a layout is found by its reference (short or full)
// and by digest, and unpacks to the same files with owners and modes.
func TestLayoutFindAndUnpack(t *testing.T) {
	// Unpacking keeps the image's owners (chown): root only. A developer's
	// machine skips; CI (.ci/run sets STRATA_CI, runs as root) must run it.
	if os.Getuid() != 0 {
		if os.Getenv("STRATA_CI") != "" {
			t.Fatal("unpacking keeps owners: needs root, and STRATA_CI is set")
		}
		t.Skip("unpacking keeps owners: needs root")
	}
	dir := t.TempDir()
	s, _ := SpecNamed("strata")
	img, err := s.Image(testBuild, fakeBinary(t, "engine"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(dir, "strata"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefAnnotation: s.Ref(testBuild)})); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadLayouts(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	for _, ref := range []string{s.Ref(testBuild), s.Repository + "@" + d.String()} {
		if l, ok := Find(loaded, ref); !ok || l.Digest != d.String() {
			t.Errorf("%s: found %v %v", ref, ok, l.Digest)
		}
	}
	if _, ok := Find(loaded, s.Repository+":9.9.9"); ok {
		t.Error("another tag must not be found")
	}
	root := filepath.Join(dir, "rootfs")
	if err := Unpack(img, root); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(root, "strata")); err != nil || string(data) != "engine" {
		t.Fatalf("/strata: %q %v", data, err)
	}
	st, err := os.Stat(filepath.Join(root, "tmp"))
	if err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Fatalf("/tmp: %v %v", st.Mode(), err)
	}
}

// The Dockerfile builds the same images where a daemon exists: same
// entrypoint, user, ports, environment, working directory and labels, and
// its default version is the release's.
func TestDockerfileAgrees(t *testing.T) {
	stages := parseDockerfile(t, "../../Dockerfile")
	stageOf := map[string]string{"strata": "strata", "strata-operator": "manager"}
	b := Build{Version: "${VERSION}", Revision: "${COMMIT}"}
	for _, s := range Specs {
		st, ok := stages[stageOf[s.Name]]
		if !ok {
			t.Fatalf("no Dockerfile stage %s for image %s", stageOf[s.Name], s.Name)
		}
		want := s.Config(b)
		if !slices.Equal(st.entrypoint, want.Entrypoint) {
			t.Errorf("%s: ENTRYPOINT %v, images %v", s.Name, st.entrypoint, want.Entrypoint)
		}
		if st.user != want.User || st.workdir != want.WorkingDir {
			t.Errorf("%s: USER %q WORKDIR %q, images %q %q", s.Name, st.user, st.workdir, want.User, want.WorkingDir)
		}
		var ports []string
		for p := range want.ExposedPorts {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		slices.Sort(st.expose)
		if !slices.Equal(st.expose, ports) {
			t.Errorf("%s: EXPOSE %v, images %v", s.Name, st.expose, ports)
		}
		env := slices.Clone(want.Env)
		slices.Sort(env)
		slices.Sort(st.env)
		if !slices.Equal(st.env, env) {
			t.Errorf("%s: ENV %v, images %v", s.Name, st.env, env)
		}
		for k, v := range want.Labels {
			if st.labels[k] != v {
				t.Errorf("%s: LABEL %s=%q, images %q", s.Name, k, st.labels[k], v)
			}
		}
		if len(st.labels) != len(want.Labels) {
			t.Errorf("%s: %d labels in the Dockerfile, %d in images", s.Name, len(st.labels), len(want.Labels))
		}
		if st.args["VERSION"] != buildinfo.Release {
			t.Errorf("%s: ARG VERSION=%s, release %s (make generate)", s.Name, st.args["VERSION"], buildinfo.Release)
		}
	}
}

// stage is what a Dockerfile stage sets, inherited from its FROM stage.
type stage struct {
	entrypoint, expose, env []string
	user, workdir           string
	labels, args            map[string]string
}

var kvRe = regexp.MustCompile(`([A-Za-z0-9_.]+)=("[^"]*"|\S+)`)

// parseDockerfile reads the instructions this Dockerfile uses (continued
// lines joined); it is not a general Dockerfile parser.
func parseDockerfile(t *testing.T, path string) map[string]*stage {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]*stage{}
	var cur *stage
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") {
			continue
		}
		if strings.HasSuffix(text, "\\") {
			line += strings.TrimSuffix(text, "\\") + " "
			continue
		}
		line += text
		instr, rest, _ := strings.Cut(line, " ")
		line = ""
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			cur = &stage{labels: map[string]string{}, args: map[string]string{}}
			if parent, ok := stages[f[0]]; ok {
				*cur = *parent
				cur.labels, cur.args = map[string]string{}, map[string]string{}
				cur.env = slices.Clone(parent.env)
			}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stages[f[2]] = cur
			}
		case "ENTRYPOINT":
			cur.entrypoint = nil
			for _, s := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				cur.entrypoint = append(cur.entrypoint, s[1])
			}
		case "USER":
			cur.user = rest
		case "WORKDIR":
			cur.workdir = rest
		case "EXPOSE":
			cur.expose = append(cur.expose, strings.Fields(rest)...)
		case "ENV", "LABEL", "ARG":
			for _, m := range kvRe.FindAllStringSubmatch(rest, -1) {
				v := strings.Trim(m[2], `"`)
				switch strings.ToUpper(instr) {
				case "ENV":
					cur.env = append(cur.env, m[1]+"="+v)
				case "LABEL":
					cur.labels[m[1]] = v
				case "ARG":
					cur.args[m[1]] = v
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}
