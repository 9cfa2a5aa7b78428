package s3api

import (
	"errors"
	"hash"
	"io"
	"net"

	"github.com/strata-storage/strata/engine/objlayer"
	"github.com/strata-storage/strata/engine/s3http"
)

// hashReader hashes what is read through it.
type hashReader struct {
	r io.Reader
	h hash.Hash
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	return n, err
}

// isBodyError reports errors of reading a request's body (the client's
// doing) rather than of storing it.
func isBodyError(err error) bool {
	var ne net.Error
	return errors.Is(err, s3http.ErrBodyTooSlow) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, objlayer.ErrIncompleteBody) || errors.As(err, &ne)
}
