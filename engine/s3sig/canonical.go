package s3sig

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Signature V4's canonical request, built as AWS's signers build it so
// that the bytes match theirs exactly:
//
//	METHOD \n URI \n QUERY \n HEADERS \n SIGNED-HEADERS \n PAYLOAD
//
// URI is the path as the client sent it, each segment percent-decoded
// once and encoded once (S3 does not normalise paths: no dot segments
// removed, no slashes merged). QUERY is every parameter, names and values
// encoded and sorted. HEADERS are the signed headers in the order signed,
// values trimmed, inner runs of spaces collapsed, repeated headers joined
// with ','.

// requestPath is the request's path exactly as sent: the request line's
// target when the request came from a server, else the URL's escaped
// path (a request built by a client, in tests).
func requestPath(r *http.Request) string {
	if u := r.RequestURI; u != "" && u[0] == '/' {
		if i := strings.IndexByte(u, '?'); i >= 0 {
			u = u[:i]
		}
		return u
	}
	return r.URL.EscapedPath()
}

// appendCanonicalRequest appends r's canonical request to dst; presigned
// leaves X-Amz-Signature out of the query.
func appendCanonicalRequest(dst []byte, r *http.Request, signedHeaders, payload string, presigned bool) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, '\n')
	dst = appendCanonicalURI(dst, requestPath(r))
	dst = append(dst, '\n')
	dst = appendCanonicalQuery(dst, r.URL.RawQuery, presigned)
	dst = append(dst, '\n')
	for rest := signedHeaders; rest != ""; {
		var name string
		name, rest, _ = strings.Cut(rest, ";")
		dst = append(dst, name...)
		dst = append(dst, ':')
		dst = appendHeaderValues(dst, r, name)
		dst = append(dst, '\n')
	}
	dst = append(dst, '\n')
	dst = append(dst, signedHeaders...)
	dst = append(dst, '\n')
	return append(dst, payload...)
}

// appendCanonicalURI appends the canonical form of an escaped path.
func appendCanonicalURI(dst []byte, p string) []byte {
	if p == "" {
		return append(dst, '/')
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%' && i+2 < len(p) && unhex(p[i+1]) >= 0 && unhex(p[i+2]) >= 0:
			// An escaped '/' stays escaped: it is part of a segment.
			dst = appendURIByte(dst, byte(unhex(p[i+1])<<4|unhex(p[i+2])))
			i += 2
		case c == '/':
			dst = append(dst, '/')
		default:
			dst = appendURIByte(dst, c)
		}
	}
	return dst
}

// appendURIByte appends c as AWS's URI encoding writes it: unreserved
// characters as they are, every other byte %XX in upper case.
func appendURIByte(dst []byte, c byte) []byte {
	if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
		return append(dst, c)
	}
	const digits = "0123456789ABCDEF"
	return append(dst, '%', digits[c>>4], digits[c&15])
}

// appendQueryComponent decodes a raw query name or value as a server
// reads it ('+' is a space, a malformed escape a literal '%') and appends
// it encoded.
func appendQueryComponent(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0:
			c = byte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		}
		dst = appendURIByte(dst, c)
	}
	return dst
}

// queryPair locates an encoded name and value in a scratch buffer.
type queryPair struct{ name, value [2]int }

// appendCanonicalQuery appends the canonical query: every parameter
// encoded, sorted by name then value (as encoded), "name=value" joined
// with '&'.
func appendCanonicalQuery(dst []byte, raw string, presigned bool) []byte {
	if raw == "" {
		return dst
	}
	var pairArr [24]queryPair
	var scratchArr [512]byte
	pairs, scratch := pairArr[:0], scratchArr[:0]
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		if presigned && name == "X-Amz-Signature" {
			continue
		}
		var p queryPair
		p.name[0] = len(scratch)
		scratch = appendQueryComponent(scratch, name)
		p.name[1], p.value[0] = len(scratch), len(scratch)
		scratch = appendQueryComponent(scratch, value)
		p.value[1] = len(scratch)
		pairs = append(pairs, p)
	}
	sortPairs(pairs, scratch)
	for i, p := range pairs {
		if i > 0 {
			dst = append(dst, '&')
		}
		dst = append(dst, scratch[p.name[0]:p.name[1]]...)
		dst = append(dst, '=')
		dst = append(dst, scratch[p.value[0]:p.value[1]]...)
	}
	return dst
}

// sortPairs sorts by name, then value. It is a heap sort written out, so
// that the stack buffers above do not escape through a closure and a
// query of many parameters still sorts in n log n.
func sortPairs(pairs []queryPair, scratch []byte) {
	less := func(a, b queryPair) bool {
		if c := bytes.Compare(scratch[a.name[0]:a.name[1]], scratch[b.name[0]:b.name[1]]); c != 0 {
			return c < 0
		}
		return bytes.Compare(scratch[a.value[0]:a.value[1]], scratch[b.value[0]:b.value[1]]) < 0
	}
	siftDown := func(root, end int) {
		for {
			child := 2*root + 1
			if child >= end {
				return
			}
			if child+1 < end && less(pairs[child], pairs[child+1]) {
				child++
			}
			if !less(pairs[root], pairs[child]) {
				return
			}
			pairs[root], pairs[child] = pairs[child], pairs[root]
			root = child
		}
	}
	for i := len(pairs)/2 - 1; i >= 0; i-- {
		siftDown(i, len(pairs))
	}
	for end := len(pairs) - 1; end > 0; end-- {
		pairs[0], pairs[end] = pairs[end], pairs[0]
		siftDown(0, end)
	}
}

// appendHeaderValues appends the canonical value of a signed header.
func appendHeaderValues(dst []byte, r *http.Request, name string) []byte {
	switch name {
	case "host":
		host := r.Host
		if host == "" {
			host = r.URL.Host
		}
		return appendTrimmed(dst, host)
	case "transfer-encoding":
		// net/http moves it out of the header map.
		if len(r.TransferEncoding) > 0 {
			for i, v := range r.TransferEncoding {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, v...)
			}
			return dst
		}
	}
	vals := lookupHeader(r.Header, name)
	if vals == nil && name == "content-length" && r.ContentLength >= 0 {
		return strconv.AppendInt(dst, r.ContentLength, 10)
	}
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendTrimmed(dst, v)
	}
	return dst
}

// appendTrimmed appends v without leading and trailing blanks and with
// each inner run of spaces as one space.
func appendTrimmed(dst []byte, v string) []byte {
	v = strings.Trim(v, " \t")
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		dst = append(dst, c)
	}
	return dst
}

// lookupHeader finds a header by its lower-case name: by its canonical
// form without allocating, else by scanning (a name net/http did not
// canonicalise).
func lookupHeader(h http.Header, lower string) []string {
	var kb [96]byte
	if len(lower) <= len(kb) {
		k := kb[:len(lower)]
		upper := true
		for i := 0; i < len(lower); i++ {
			c := lower[i]
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			k[i] = c
			upper = c == '-'
		}
		if vs, ok := h[string(k)]; ok || isToken(lower) {
			return vs // net/http canonicalises every token name
		}
	}
	for k, vs := range h {
		if strings.EqualFold(k, lower) {
			return vs
		}
	}
	return nil
}

// isToken reports whether a header name is made of HTTP token
// characters only, the names net/http canonicalises.
func isToken(name string) bool {
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	return name != ""
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110).
func isTokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// listHas reports whether a ';'-separated list names name (any case).
func listHas(list, name string) bool {
	for list != "" {
		var item string
		item, list, _ = strings.Cut(list, ";")
		if strings.EqualFold(item, name) {
			return true
		}
	}
	return false
}

// maxNotSigned bounds the unsigned headers an answer names (and the
// scan for them).
const maxNotSigned = 16

// unsignedHeaders lists the headers S3 requires signed that are sent but
// not signed: Host and every x-amz- header.
func unsignedHeaders(r *http.Request, signed string) []string {
	var missing []string
	if !listHas(signed, "host") {
		missing = append(missing, "host")
	}
	for k := range r.Header {
		if len(missing) == maxNotSigned {
			break
		}
		if len(k) > 6 && strings.EqualFold(k[:6], "x-amz-") && !listHas(signed, k) {
			missing = append(missing, strings.ToLower(k))
		}
	}
	slices.Sort(missing)
	return missing
}
