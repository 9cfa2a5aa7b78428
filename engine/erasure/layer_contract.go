package erasure

import (
	"context"
	"io"

	"github.com/strata-storage/strata/engine/objlayer"
)

// Layer is a server's pools as the S3 front end sees them: the object
// layer's contract (objlayer.Layer). Reads that meet a missing, stale or
// damaged shard queue the object for healing through Heal, so the front
// end never learns about shards.
type Layer struct {
	*Pools
	// Heal is told about an object read with a shard to repair; nil: no
	// one is told.
	Heal func(bucket, object string)
}

var _ objlayer.Layer = Layer{}

// OpenObject resolves a version to read it.
func (l Layer) OpenObject(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.Handle, error) {
	h, err := l.Pools.OpenObject(ctx, bucket, object, versionID)
	if err != nil {
		return nil, err
	}
	return l.served(h), nil
}

// OpenObjectMeta resolves a version without reading its data.
func (l Layer) OpenObjectMeta(ctx context.Context, bucket, object string, versionID *[16]byte) (objlayer.Handle, error) {
	h, err := l.Pools.OpenObjectMeta(ctx, bucket, object, versionID)
	if err != nil {
		return nil, err
	}
	return l.served(h), nil
}

func (l Layer) served(h *ObjectHandle) servedHandle {
	if len(h.Stale) > 0 {
		l.heal(h.Info.Bucket, h.Info.Name)
	}
	return servedHandle{h: h, l: l}
}

func (l Layer) heal(bucket, object string) {
	if l.Heal != nil {
		l.Heal(bucket, object)
	}
}

// servedHandle is an ObjectHandle as the contract's Handle.
type servedHandle struct {
	h *ObjectHandle
	l Layer
}

func (s servedHandle) Info() objlayer.ObjectInfo { return s.h.Info }

func (s servedHandle) WriteRange(ctx context.Context, w io.Writer, offset, length int64) error {
	bad, err := s.h.WriteRange(ctx, w, offset, length)
	if len(bad) > 0 {
		s.l.heal(s.h.Info.Bucket, s.h.Info.Name)
	}
	return err
}

// Close releases nothing: an erasure handle holds records, not files.
func (s servedHandle) Close() error { return nil }
