package s3front

import (
	"context"
	"time"

	"github.com/strata-storage/strata/engine/objlayer"
)

// ObjectLayer is what the front end needs of the storage below it.
type ObjectLayer = objlayer.Layer

// Hooks let the server observe what the front end does; nil fields are
// skipped.
type Hooks struct {
	// FirstByte is told how long after the request started a GET's body
	// produced its first byte.
	FirstByte func(d time.Duration)
}

// requestStart is when the request began, when ctx is the front end's
// request context.
func requestStart(ctx context.Context) time.Time {
	if rc, ok := frontCtx(ctx); ok {
		return rc.Time()
	}
	return time.Now()
}

// queryArg returns a query argument of the request, when ctx is the front
// end's request context (arguments the front end does not pass on, such as
// encoding-type).
func queryArg(ctx context.Context, name string) string {
	if rc, ok := frontCtx(ctx); ok {
		return string(rc.QueryArgs().Peek(name))
	}
	return ""
}

// setResponseHeader sets a header on the response, when ctx is the front
// end's request context: for headers an error answer carries (a 304's ETag),
// which the front end's error path does not set.
func setResponseHeader(ctx context.Context, name, value string) {
	if rc, ok := frontCtx(ctx); ok {
		rc.Response.Header.Set(name, value)
	}
}

// queryHas reports whether the request's query names an argument, empty or
// not.
func queryHas(ctx context.Context, name string) bool {
	rc, ok := frontCtx(ctx)
	return ok && rc.QueryArgs().Has(name)
}
