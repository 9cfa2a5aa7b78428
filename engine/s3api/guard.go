package s3api

import (
	"github.com/strata-storage/strata/engine/s3err"
)

// guard refuses, after authentication and before anything else is done,
// what the request asks for that Strata does not offer: storage classes
// other than STANDARD, and (for requests that do not write data, whose
// encryption headers are checked after the access decision) malformed
// encryption headers.
func (r *request) guard() error {
	if sc := r.h("X-Amz-Storage-Class"); sc != "" && sc != "STANDARD" {
		return s3err.InvalidStorageClass
	}
	if r.has("torrent") || r.has("session") {
		return s3err.NotImplemented.With("The ?torrent and ?session sub-resources are not implemented.")
	}
	switch r.op {
	case opPutObject, opCopyObject, opUploadPart, opUploadPartCopy, opCreateMPU, opPostObject:
		return nil
	}
	read := r.hr.Method == get || r.hr.Method == head
	return r.checkSSE(read)
}
