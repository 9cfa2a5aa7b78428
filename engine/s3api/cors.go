package s3api

import (
	"net/http"

	"github.com/strata-storage/strata/engine/s3err"
	"github.com/strata-storage/strata/engine/s3rules"
)

// CORS: a browser's preflight (OPTIONS, answered without credentials from
// the bucket's rules) and the headers of the actual request that follows.

var (
	errMissingOrigin  = s3err.BadRequest.With("Insufficient information. Origin request header needed.")
	errCORSNotEnabled = s3err.AccessForbidden.With("CORSResponse: CORS is not enabled for this bucket.")
)

// servePreflight answers an OPTIONS request from the bucket's CORS rules.
func (r *request) servePreflight() error {
	origin := r.h("Origin")
	if origin == "" {
		return errMissingOrigin
	}
	method := r.h("Access-Control-Request-Method")
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		return s3err.BadRequest.Withf("Invalid Access-Control-Request-Method: %s", method)
	}
	headers, err := s3rules.ParseRequestHeaders(r.h("Access-Control-Request-Headers"))
	if err != nil {
		return err
	}
	bk, err := r.bucketInfo()
	if err != nil {
		return err
	}
	c := s3rules.StoredCORS(bk.CORS)
	if c == nil {
		return errCORSNotEnabled
	}
	a, ok := c.Match(origin, method, headers)
	if !ok {
		return s3rules.ErrCORSForbidden
	}
	a.Headers(r.w.Header())
	return r.empty(http.StatusOK)
}

// applyCORS adds the CORS headers a rule of the bucket gives the request's
// origin and method (nothing when none matches: the browser then refuses
// the answer, as S3 leaves it to).
func (r *request) applyCORS() {
	bk, err := r.bucketInfo()
	if err != nil {
		return
	}
	c := s3rules.StoredCORS(bk.CORS)
	if c == nil {
		return
	}
	method := r.h("Access-Control-Request-Method")
	if method == "" {
		method = r.hr.Method
	}
	headers, err := s3rules.ParseRequestHeaders(r.h("Access-Control-Request-Headers"))
	if err != nil {
		return
	}
	if a, ok := c.Match(r.h("Origin"), method, headers); ok {
		a.Headers(r.w.Header())
		if a.ExposeHeaders == "" {
			r.w.Header()["Access-Control-Expose-Headers"] = []string{"ETag"}
		}
	}
}
