// Command images writes the release's container images without a daemon
// (`make images`): for each image an OCI image layout in <out>/<name>/
// (what the local cluster serves to its nodes, and what `skopeo copy
// oci:...` or `crane push` take) and a tarball <out>/<name>.tar in the
// format `docker load`, `ctr images import` and `kind load image-archive`
// read.
//
//	go run ./hack/images -out bin/images -version 0.1.0 -revision abc123 \
//	    -created 2026-11-24T08:00:00Z -binary strata=bin/strata -binary strata-operator=bin/manager
//
// With -image it writes only the layouts of other binaries, each under the
// reference given (hack/monitoring-images.sh: prometheus-operator and
// Prometheus for the local cluster):
//
//	go run ./hack/images -out bin/images \
//	    -image ref=quay.io/prometheus/prometheus:v3.5.0,entrypoint=/bin/prometheus,user=65534:65534,binary=/path/to/prometheus
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/strata-storage/strata/internal/images"
)

// binaries collects -binary name=path flags.
type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaries) Set(v string) error {
	k, p, ok := strings.Cut(v, "=")
	if !ok || k == "" || p == "" {
		return fmt.Errorf("want name=path, got %q", v)
	}
	if _, known := images.SpecNamed(k); !known {
		return fmt.Errorf("no image named %q", k)
	}
	b[k] = p
	return nil
}

// binaryImages collects -image flags: an image of a binary outside the
// release.
type binaryImages []binaryImage

type binaryImage struct {
	images.BinaryImage
	binary string
}

func (b *binaryImages) String() string { return fmt.Sprint(len(*b)) }
func (b *binaryImages) Set(v string) error {
	var bi binaryImage
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "ref":
			bi.Ref = val
		case "entrypoint":
			bi.Entrypoint = val
		case "user":
			bi.User = val
		case "workdir":
			bi.WorkingDir = val
		case "source":
			bi.Source = val
		case "binary":
			bi.binary = val
		default:
			return fmt.Errorf("unknown key %q (want ref, entrypoint, binary, and optionally user, workdir, source)", k)
		}
	}
	if bi.Ref == "" || bi.Entrypoint == "" || bi.binary == "" {
		return fmt.Errorf("%q: ref, entrypoint and binary are required", v)
	}
	*b = append(*b, bi)
	return nil
}

func main() {
	out := flag.String("out", "bin/images", "directory for the layouts and tarballs")
	var b images.Build
	flag.StringVar(&b.Version, "version", "", "release version: the tag and the version label")
	flag.StringVar(&b.Revision, "revision", "", "source commit: the revision label")
	created := flag.String("created", "1970-01-01T00:00:00Z", "creation time (RFC 3339), the commit's time for reproducible images")
	bins := binaries{}
	flag.Var(bins, "binary", "name=path of an image's binary (repeat); every image of the release must have one")
	baseRootfs := flag.String("base-rootfs", "", "only write the base layer's files into this directory (the Dockerfile's base stage)")
	var others binaryImages
	flag.Var(&others, "image", "ref=REPO:TAG,entrypoint=PATH,binary=PATH[,user=UID:GID][,workdir=DIR][,source=URL]: only write the layout of this image of another binary (repeat)")
	flag.Parse()
	if *baseRootfs != "" {
		if err := images.WriteBase(*baseRootfs); err != nil {
			fail("%v", err)
		}
		return
	}
	t, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		fail("-created: %v", err)
	}
	b.Created = t.UTC()
	if len(others) > 0 {
		for _, o := range others {
			s, ob, err := o.Spec(b.Created)
			if err != nil {
				fail("%v", err)
			}
			digest, err := write(*out, s, ob, o.binary, false)
			if err != nil {
				fail("%s: %v", o.Ref, err)
			}
			fmt.Printf("%s@%s\n", o.Ref, digest)
		}
		return
	}
	if b.Version == "" || b.Revision == "" {
		fail("-version and -revision are required")
	}
	for _, s := range images.Specs {
		bin, ok := bins[s.Name]
		if !ok {
			fail("no -binary for image %s", s.Name)
		}
		digest, err := write(*out, s, b, bin, true)
		if err != nil {
			fail("%s: %v", s.Name, err)
		}
		fmt.Printf("%s@%s\n", s.Ref(b), digest)
	}
}

// write builds one image and writes its layout and, when withTarball, its
// tarball, replacing what a previous run left.
func write(out string, s images.Spec, b images.Build, binary string, withTarball bool) (string, error) {
	img, err := s.Image(b, binary)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(out, s.Name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		images.RefAnnotation: s.Ref(b),
	})); err != nil {
		return "", err
	}
	if !withTarball {
		return digest.String(), nil
	}
	tag, err := name.NewTag(s.Ref(b))
	if err != nil {
		return "", err
	}
	if err := tarball.WriteToFile(filepath.Join(out, s.Name+".tar"), tag, img); err != nil {
		return "", err
	}
	return digest.String(), nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "images: "+format+"\n", args...)
	os.Exit(1)
}
