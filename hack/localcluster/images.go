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

	"github.com/strata-storage/strata/internal/images"
)

// image is an image from the OCI layouts `make images` wrote, unpacked once
// into the state directory: the operator runs as a process of the cluster
// namespace from its image's entrypoint.
type image struct {
	rootfs string // the unpacked image (shared, never written)
	entry  []string
	uid    int // the image's user
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
		return image{}, fmt.Errorf("image %q is not among the images the cluster serves (%s, built by `make images`)", ref, strings.Join(s.refs(), ", "))
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
	uid, _, err := images.ImageUser(cf)
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
	img := image{rootfs: root, entry: cf.Config.Entrypoint, uid: uid}
	s.unpacked[l.Digest] = img
	return img, nil
}
