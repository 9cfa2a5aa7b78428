package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Local is an image found in an OCI layout on this machine.
type Local struct {
	Ref        string // as its layout names it
	Repository string // Ref without its tag
	Digest     string // sha256:...
	Image      v1.Image
}

// LoadLayouts reads every OCI layout directly under dir (as `make images`
// writes them) and returns their images by normalized reference
// (name.ParseReference: "strata:1" is docker.io/library/strata:1) and by
// repository@digest.
func LoadLayouts(dir string) (map[string]Local, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]Local{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p, err := layout.FromPath(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // not a layout
		}
		idx, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		for _, d := range m.Manifests {
			ref := d.Annotations[RefAnnotation]
			if ref == "" {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
			parsed, err := name.ParseReference(ref)
			if err != nil {
				return nil, fmt.Errorf("layout %s: %w", e.Name(), err)
			}
			l := Local{Ref: ref, Repository: parsed.Context().Name(), Digest: d.Digest.String(), Image: img}
			out[parsed.Name()] = l
			out[parsed.Context().Name()+"@"+d.Digest.String()] = l
		}
	}
	return out, nil
}

// Find resolves an image reference as a pod names it against the loaded
// images.
func Find(loaded map[string]Local, ref string) (Local, bool) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return Local{}, false
	}
	l, ok := loaded[parsed.Name()]
	return l, ok
}

// Unpack writes the image's filesystem (its layers flattened, whiteouts
// applied) into dir, which must not exist: it is assembled in a sibling
// and renamed into place, so a half-unpacked image is never used.
func Unpack(img v1.Image, dir string) error {
	tmp := dir + ".unpacking"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := untar(tar.NewReader(rc), tmp); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// untar writes a flattened image tar into root, owners and modes kept.
func untar(tr *tar.Reader, root string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.Clean("/" + h.Name)[1:]
		if rel == "" {
			continue
		}
		target := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := fileMode(h.Mode)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			continue // a link's owner and mode are its target's
		case tar.TypeLink:
			src := filepath.Join(root, filepath.Clean("/" + h.Linkname)[1:])
			if err := os.Link(src, target); err != nil {
				return err
			}
			continue
		default:
			continue // devices, fifos: not in these images
		}
		if err := os.Lchown(target, h.Uid, h.Gid); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
	}
}

// tarSpecialBits maps a tar mode's setuid/setgid/sticky bits to Go's.
func tarSpecialBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// ImageUser parses the config's User ("uid:gid" or "uid"; names are not
// looked up: these images use numbers).
func ImageUser(cfg *v1.ConfigFile) (uid, gid int, err error) {
	u := cfg.Config.User
	if u == "" {
		return 0, 0, nil
	}
	us, gs, _ := strings.Cut(u, ":")
	if _, err := fmt.Sscanf(us, "%d", &uid); err != nil {
		return 0, 0, fmt.Errorf("image user %q is not numeric", u)
	}
	gid = uid
	if gs != "" {
		if _, err := fmt.Sscanf(gs, "%d", &gid); err != nil {
			return 0, 0, fmt.Errorf("image group %q is not numeric", u)
		}
	}
	return uid, gid, nil
}
