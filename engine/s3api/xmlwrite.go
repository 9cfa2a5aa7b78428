package s3api

import (
	"strconv"
	"unicode/utf8"
)

// Appending XML by hand, for the documents served most and largest: pages
// of listings (a page of 1,000 objects marshalled by reflection cost a
// quarter of a listing's server CPU). Escaping is encoding/xml's, so the
// documents are what it would make.

func appendText(b []byte, name, s string) []byte {
	b = appendOpen(b, name)
	b = appendEscaped(b, s)
	return appendClose(b, name)
}

// appendNonEmpty appends an element only when s is not empty.
func appendNonEmpty(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendText(b, name, s)
}

func appendInt(b []byte, name string, n int64) []byte {
	b = appendOpen(b, name)
	b = strconv.AppendInt(b, n, 10)
	return appendClose(b, name)
}

func appendBool(b []byte, name string, v bool) []byte {
	b = appendOpen(b, name)
	b = strconv.AppendBool(b, v)
	return appendClose(b, name)
}

func appendOpen(b []byte, name string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	return append(b, '>')
}

func appendClose(b []byte, name string) []byte {
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// appendEscaped escapes character data as encoding/xml does: the five
// markup characters and tab, newline and carriage return as references,
// and what XML cannot carry (invalid UTF-8, characters outside XML's
// range) as U+FFFD.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\'' && c != '&' && c != '<' && c != '>' {
			i++
			continue
		}
		r, width := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch r {
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '\t':
			esc = "&#x9;"
		case '\n':
			esc = "&#xA;"
		case '\r':
			esc = "&#xD;"
		default:
			if !xmlChar(r) || r == utf8.RuneError && width == 1 {
				esc = "\uFFFD"
				break
			}
			i += width
			continue
		}
		b = append(b, s[last:i]...)
		b = append(b, esc...)
		i += width
		last = i
	}
	return append(b, s[last:]...)
}

// xmlChar reports whether XML 1.0 can carry r.
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}
