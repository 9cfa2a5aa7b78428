package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/strata-storage/strata/internal/images"
)

// image is what a pod's image reference runs here: an image from the OCI
// layouts `make images` wrote, unpacked once into the state directory.
type image struct {
	ref      string
	id       string // repository@digest, the container status' imageID
	rootfs   string // the unpacked image (shared, never written)
	entry    []string
	cmd      []string
	env      []string
	workdir  string
	uid, gid int
}

// argv is what a container runs: its command, else the image's entrypoint;
// then its args, else (with no command of its own) the image's cmd.
func (img image) argv(c *corev1.Container, expand func(string) string) []string {
	argv := slices.Clone(img.entry)
	args := img.cmd
	if len(c.Command) > 0 {
		argv, args = nil, nil
		for _, s := range c.Command {
			argv = append(argv, expand(s))
		}
	}
	if len(c.Args) > 0 {
		args = nil
		for _, s := range c.Args {
			args = append(args, expand(s))
		}
	}
	return append(argv, args...)
}

// imageStore resolves image references against the loaded layouts and
// unpacks each image the first time a container needs it.
type imageStore struct {
	dir     string // <state>/images
	layouts string // where the OCI layouts are
	loaded  map[string]images.Local

	mu       sync.Mutex
	unpacked map[string]image // by digest
}

func newImageStore(layouts, state string) (*imageStore, error) {
	loaded, err := images.LoadLayouts(layouts)
	if err != nil {
		return nil, fmt.Errorf("images in %s: %w (run `make images`)", layouts, err)
	}
	if len(loaded) == 0 {
		return nil, fmt.Errorf("no OCI image layouts in %s (run `make images`)", layouts)
	}
	return &imageStore{dir: filepath.Join(state, "images"), layouts: layouts, loaded: loaded, unpacked: map[string]image{}}, nil
}

// refs are the references the store runs, for error messages.
func (s *imageStore) refs() []string {
	var out []string
	for _, l := range s.loaded {
		if !slices.Contains(out, l.Ref) {
			out = append(out, l.Ref)
		}
	}
	sort.Strings(out)
	return out
}

// refsOf are the references of the images of one repository.
func (s *imageStore) refsOf(repository string) []string {
	var out []string
	for _, l := range s.loaded {
		if l.Repository == repository && !slices.Contains(out, l.Ref) {
			out = append(out, l.Ref)
		}
	}
	sort.Strings(out)
	return out
}

// resolve finds, and unpacks if needed, the image of a reference.
func (s *imageStore) resolve(ref string) (image, error) {
	l, ok := images.Find(s.loaded, ref)
	if !ok {
		return image{}, fmt.Errorf("image %q is not among the images this node agent runs (%s, built by `make images`)", ref, strings.Join(s.refs(), ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if img, ok := s.unpacked[l.Digest]; ok {
		return img, nil
	}
	cf, err := l.Image.ConfigFile()
	if err != nil {
		return image{}, err
	}
	uid, gid, err := images.ImageUser(cf)
	if err != nil {
		return image{}, err
	}
	root := filepath.Join(s.dir, strings.ReplaceAll(l.Digest, ":", "-"))
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return image{}, err
		}
		if err := images.Unpack(l.Image, root); err != nil {
			return image{}, fmt.Errorf("unpacking %s: %w", l.Ref, err)
		}
	}
	img := image{
		ref: l.Ref, id: l.Repository + "@" + l.Digest, rootfs: root,
		entry: cf.Config.Entrypoint, cmd: cf.Config.Cmd, env: cf.Config.Env, workdir: cf.Config.WorkingDir,
		uid: uid, gid: gid,
	}
	s.unpacked[l.Digest] = img
	return img, nil
}

// linkTree recreates the unpacked image src at dst: directories and
// symlinks made anew, regular files hard-linked (no copy, no space). The
// shared files are root's and not writable by the images' user; the agent
// replaces the /etc files it writes by rename, never in place.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
					return err
				}
			}
			return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid))
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			return os.Link(p, target)
		}
	})
}

// withImageEnv puts the image's environment before the container's, so the
// container's own values win, as in a runtime.
func withImageEnv(imageEnv, env []string) []string {
	own := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		own[k] = true
	}
	var out []string
	for _, kv := range imageEnv {
		k, _, _ := strings.Cut(kv, "=")
		if !own[k] {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}
