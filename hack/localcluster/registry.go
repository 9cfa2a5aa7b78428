package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-storage/strata/internal/images"
)

// imageRegistry serves the images of --images to the nodes, as the
// registries their references name would: each node's containerd has the
// harness's registry as the only host of ghcr.io, quay.io, registry.k8s.io
// and docker.io, so pulls, pull failures and image IDs are real while
// nothing leaves the machine.
type imageRegistry struct {
	srv *http.Server
	ln  net.Listener
}

// startRegistry listens on every address of the cluster namespace (the
// nodes reach it on the node network's bridge) and pushes each loaded
// image under its repository path.
func startRegistry(ctx context.Context, log *slog.Logger, state string, loaded map[string]images.Local) (*imageRegistry, error) {
	blobs := filepath.Join(state, "registry")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", registryPort))
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	h := registry.New(
		registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)),
		registry.Logger(slog.NewLogLogger(log.Handler(), slog.LevelDebug)),
	)
	r := &imageRegistry{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("registry", "error", err)
		}
	}()
	pushed := map[string]bool{}
	for _, l := range loaded {
		if pushed[l.Ref] {
			continue
		}
		pushed[l.Ref] = true
		if err := r.push(ctx, l); err != nil {
			r.stop()
			return nil, err
		}
	}
	log.Info("registry serving", "images", len(pushed))
	return r, nil
}

// push writes one image under the registry's address with its repository
// path and tag (ghcr.io/strata-storage/strata:1 as
// 127.0.0.1:5000/strata-storage/strata:1): a mirror is asked for the
// path without the registry's host.
func (r *imageRegistry) push(ctx context.Context, l images.Local) error {
	ref, err := name.ParseReference(l.Ref)
	if err != nil {
		return err
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return fmt.Errorf("image %s: the registry serves tagged references only", l.Ref)
	}
	local, err := name.NewTag(fmt.Sprintf("127.0.0.1:%d/%s:%s", registryPort, tag.RepositoryStr(), tag.TagStr()), name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(local, l.Image, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s to the local registry: %w", l.Ref, err)
	}
	return nil
}

func (r *imageRegistry) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
