package s3rules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-storage/strata/engine/s3err"
)

// Span is the part of an object a read serves.
type Span struct {
	Offset, Length int64
	// Partial: a range was applied (206 with Content-Range).
	Partial bool
}

// ContentRange is the Content-Range header of a partial answer.
func (s Span) ContentRange(size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", s.Offset, s.Offset+s.Length-1, size)
}

// ParseRange applies a Range header to an object of size bytes, as S3
// does: a single "bytes=" range (first-last, first-, or -suffix); anything
// it cannot use (another unit, several ranges, malformed numbers, first
// after last) is ignored and the whole object served; a range starting at
// or past the end is InvalidRange (416).
func ParseRange(header string, size int64) (Span, error) {
	whole := Span{Length: size}
	unit, spec, ok := strings.Cut(header, "=")
	if header == "" || !ok || strings.TrimSpace(unit) != "bytes" || strings.Contains(spec, ",") {
		return whole, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return whole, nil
	}
	invalid := s3err.InvalidRange.Field("RangeRequested", header).Field("ActualObjectSize", strconv.FormatInt(size, 10))
	if first == "" {
		n, ok := rangeNumber(last)
		switch {
		case !ok:
			return whole, nil
		case n == 0:
			return Span{}, invalid
		case size == 0:
			return whole, nil
		}
		n = min(n, size)
		return Span{Offset: size - n, Length: n, Partial: true}, nil
	}
	start, ok := rangeNumber(first)
	if !ok {
		return whole, nil
	}
	end := size - 1
	if last != "" {
		if end, ok = rangeNumber(last); !ok || end < start {
			return whole, nil
		}
	}
	if start >= size {
		return Span{}, invalid
	}
	end = min(end, size-1)
	return Span{Offset: start, Length: end - start + 1, Partial: true}, nil
}

// rangeNumber reads one bound of a range: a decimal number, not negative
// (ok false for anything else, which makes the range one to ignore).
func rangeNumber(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// ParseCopyRange applies UploadPartCopy's x-amz-copy-source-range
// ("bytes=first-last", both required) to a source of size bytes.
func ParseCopyRange(header string, size int64) (Span, error) {
	if header == "" {
		return Span{Length: size}, nil
	}
	bad := s3err.InvalidArgumentNamed("Invalid copy source range: the range must be bytes=first-last.", "x-amz-copy-source-range", header)
	spec, ok := strings.CutPrefix(header, "bytes=")
	if !ok {
		return Span{}, bad
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return Span{}, bad
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	end, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return Span{}, bad
	}
	if start >= size || end >= size {
		return Span{}, s3err.InvalidRange.Withf("The requested range %s is not satisfiable for a source of %d bytes.", header, size).
			Field("RangeRequested", header).Field("ActualObjectSize", strconv.FormatInt(size, 10))
	}
	return Span{Offset: start, Length: end - start + 1, Partial: true}, nil
}
