package webhookcert

import (
	"crypto/x509"
	"fmt"
	"time"
)

// Lifetimes are how long the CAs and serving certificates live, and how
// long a CA change overlaps.
//
// A CA is replaced at two thirds of its life, in three steps each one
// Overlap apart: the next CA is added to the caBundle; once the bundle
// has held it for Overlap, it signs a new serving certificate (the switch)
// and the old CA is kept in the bundle; Overlap after the switch the old
// CA leaves the bundle. The Overlap covers the API server taking in a new
// caBundle, and every replica loading the new serving certificate (they
// re-read the Secret every Resync). A serving certificate is renewed at two
// thirds of its life from the same CA, which needs no overlap.
type Lifetimes struct {
	CA      time.Duration
	Serving time.Duration
	Overlap time.Duration
}

// DefaultLifetimes: a CA for a year, replaced after about 243 days; a
// serving certificate for 90 days, renewed after 60; an hour of overlap.
// Rotating yearly keeps the rotation a path that runs, not one first
// exercised a decade after installation.
var DefaultLifetimes = Lifetimes{CA: 365 * 24 * time.Hour, Serving: 90 * 24 * time.Hour, Overlap: time.Hour}

func (l Lifetimes) validate() error {
	switch {
	case l.CA <= 0 || l.Serving <= 0 || l.Overlap <= 0:
		return fmt.Errorf("lifetimes must be positive: %+v", l)
	case 2*l.Overlap >= l.CA/3:
		return fmt.Errorf("a CA rotation (two overlaps, %v) must fit in the last third of the CA's life (%v)", 2*l.Overlap, l.CA/3)
	case l.Overlap >= l.Serving/3:
		return fmt.Errorf("the overlap (%v) must be shorter than a third of a serving certificate's life (%v)", l.Overlap, l.Serving/3)
	}
	return nil
}

// step is one change to the Secret's material.
type step int

const (
	stepNone         step = iota
	stepStart             // no usable CA: a new CA and serving certificate, nothing else trusted
	stepReissue           // the serving certificate is missing, expired, for other names or not from the CA
	stepAddNext           // the CA is two thirds through its life: the next CA joins the bundle
	stepSwitch            // the bundle has trusted the next CA for the overlap: it becomes the CA, with a new serving certificate
	stepDropPrevious      // the overlap after a switch is over: the old CA leaves the bundle
	stepRenew             // the serving certificate is two thirds through its life: a new one from the same CA
)

func (s step) String() string {
	return [...]string{"none", "start", "reissue", "add-next-ca", "switch-to-next-ca", "drop-previous-ca", "renew"}[s]
}

// nextStep decides what the Secret needs at now, one step at a time.
// nextTrusted says whether every webhook's caBundle holds the next CA:
// the switch waits for it, however late the clock.
func nextStep(m material, now time.Time, h hosts, l Lifetimes, nextTrusted bool) step {
	switch {
	case m.ca == nil || !now.Before(m.ca.cert.NotAfter):
		return stepStart
	case m.serving == nil || !now.Before(m.serving.cert.NotAfter) || !h.matches(m.serving.cert) ||
		m.serving.cert.CheckSignatureFrom(m.ca.cert) != nil:
		return stepReissue
	case m.next != nil && nextTrusted && !now.Before(issuedAt(m.next.cert).Add(l.Overlap)):
		return stepSwitch
	case m.previous != nil && !now.Before(issuedAt(m.serving.cert).Add(l.Overlap)):
		return stepDropPrevious
	case m.next == nil && !now.Before(renewAt(m.ca.cert.NotBefore, m.ca.cert.NotAfter)):
		return stepAddNext
	case !now.Before(renewAt(m.serving.cert.NotBefore, m.serving.cert.NotAfter)):
		return stepRenew
	}
	return stepNone
}

// apply makes the certificates s calls for.
func apply(s step, m material, now time.Time, h hosts, l Lifetimes) (material, error) {
	var err error
	switch s {
	case stepStart:
		m = material{}
		if m.ca, err = newCA(now, l.CA); err != nil {
			return m, err
		}
		m.serving, err = newServing(m.ca, h, now, l.Serving)
	case stepReissue, stepRenew:
		m.serving, err = newServing(m.ca, h, now, l.Serving)
	case stepAddNext:
		m.next, err = newCA(now, l.CA)
	case stepSwitch:
		m.previous, m.ca, m.next = m.ca.cert, m.next, nil
		m.serving, err = newServing(m.ca, h, now, l.Serving)
	case stepDropPrevious:
		m.previous = nil
	}
	return m, err
}

// issuedAt is when a certificate of ours was made.
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(clockSkew) }

// renewAt is two thirds through [notBefore, notAfter].
func renewAt(notBefore, notAfter time.Time) time.Time {
	return notBefore.Add(notAfter.Sub(notBefore) * 2 / 3)
}
