// Package certfiles loads the files of --certs-dir (a mounted
// kubernetes.io/tls Secret: tls.crt, tls.key and, optionally, ca.crt) and
// loads them again when they change, so the listeners that present and
// verify them follow a renewal or a CA rotation without a restart. What a
// listener holds is what this package last loaded: the admin API reports
// the same values, not a fresh read of the files.
package certfiles

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"
)

// File names inside --certs-dir (those of a kubernetes.io/tls Secret).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// DefaultInterval is how often the files are checked for a change unless
// told otherwise (--certs-reload-interval). A check is one stat of a file,
// made by the next handshake after the interval (none while no handshake
// comes), so a second costs nothing measurable; it was 10 s until
// 2026-12-02, and each step of a CA rotation waited up to that long
// before a pod served or trusted what its mounted Secret already held.
const DefaultInterval = time.Second

// Interval is every, or DefaultInterval when every is not positive.
func Interval(every time.Duration) time.Duration {
	if every <= 0 {
		return DefaultInterval
	}
	return every
}

// Reloaded is a value loaded from files and loaded again when the first of
// them changes (cert-manager and kubelet replace Secret files in place),
// checked at most every interval. A load that fails keeps the last good
// value: a half-written Secret must not cut a listener off.
type Reloaded[T any] struct {
	file     string // whose modification time says when to reload
	interval time.Duration
	load     func() (T, error)

	mu      sync.Mutex
	val     T
	ok      bool
	stamp   time.Time // file's modification time at the last load; zero: it was missing
	checked time.Time
}

// NewReloaded returns a value that load reads, reloaded when file changes
// (appears, disappears or gets a new modification time). Nothing is read
// before the first Get.
func NewReloaded[T any](file string, interval time.Duration, load func() (T, error)) *Reloaded[T] {
	return &Reloaded[T]{file: file, interval: interval, load: load}
}

// Get returns the value as last loaded, loading it again first when the
// interval has passed and the file changed.
func (r *Reloaded[T]) Get() (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok && time.Since(r.checked) < r.interval {
		return r.val, nil
	}
	r.checked = time.Now()
	stamp, err := modTime(r.file)
	if err == nil && r.ok && stamp.Equal(r.stamp) {
		return r.val, nil
	}
	var v T
	if err == nil {
		v, err = r.load()
	}
	if err != nil {
		if r.ok {
			return r.val, nil
		}
		return v, err
	}
	r.val, r.ok, r.stamp = v, true, stamp
	return r.val, nil
}

// modTime is file's modification time, zero when it does not exist.
func modTime(file string) (time.Time, error) {
	fi, err := os.Stat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// NewKeyPair returns tls.crt and tls.key, reloaded when tls.crt changes.
func NewKeyPair(certFile, keyFile string, interval time.Duration) *Reloaded[*tls.Certificate] {
	return NewReloaded(certFile, interval, func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		return &cert, nil
	})
}

// Leaf is the certificate a key pair presents; nil for none.
func Leaf(c *tls.Certificate) *x509.Certificate {
	switch {
	case c == nil || len(c.Certificate) == 0:
		return nil
	case c.Leaf != nil:
		return c.Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

// Bundle is what peers are verified against: the CAs of ca.crt, or, when
// there is no ca.crt, the fallback roots (then CAs is empty).
type Bundle struct {
	Pool *x509.CertPool
	CAs  []*x509.Certificate
}

// FromCAFile reports whether the bundle is ca.crt's (not the fallback).
func (b Bundle) FromCAFile() bool { return len(b.CAs) > 0 }

// Trust is the CA bundle of a ca.crt, re-read when the file changes,
// appears or disappears. During a CA rotation ca.crt holds the old and the
// new CA: every certificate in it is trusted.
type Trust struct {
	r *Reloaded[Bundle]
}

// NewTrust returns the bundle of file, with fallback as its pool while
// there is no such file (nil: no pool).
func NewTrust(file string, interval time.Duration, fallback *x509.CertPool) *Trust {
	return &Trust{r: NewReloaded(file, interval, func() (Bundle, error) {
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			return Bundle{Pool: fallback}, nil
		}
		if err != nil {
			return Bundle{}, err
		}
		cas, err := ParseCertificates(data)
		if err != nil {
			return Bundle{}, fmt.Errorf("%s: %w", file, err)
		}
		pool := x509.NewCertPool()
		for _, c := range cas {
			pool.AddCert(c)
		}
		return Bundle{Pool: pool, CAs: cas}, nil
	})}
}

// Get returns the bundle as last loaded (reloading it when due).
func (t *Trust) Get() (Bundle, error) { return t.r.Get() }

// CAs are the certificates of ca.crt as last loaded; none for a nil Trust,
// no file, or a file that never loaded.
func (t *Trust) CAs() []*x509.Certificate {
	if t == nil {
		return nil
	}
	b, err := t.Get()
	if err != nil {
		return nil
	}
	return b.CAs
}

// ParseCertificates parses every CERTIFICATE block of PEM data. Data with
// none, a block that does not parse, or a block cut short (a file caught
// half-written) is an error: a bundle must not load with a CA missing.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	switch {
	case bytes.Contains(rest, []byte("-----BEGIN")):
		return nil, errors.New("a PEM block is cut short")
	case len(certs) == 0:
		return nil, errors.New("no certificate")
	}
	return certs, nil
}
