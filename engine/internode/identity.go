package internode

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Every request names the node it is for (hdrNode: the peer's host in the
// topology) and a node refuses, before running it, a request for another
// node (421 Misdirected Request); the client takes that answer as no
// answer at all. Nothing else tells nodes apart: the request signatures
// prove only the deployment's shared secret, and a tenant's certificate
// usually covers every pod (a wildcard), so a peer's name resolving to
// another node's address (a stale DNS answer after a pod restarted with a
// new IP, an address reused) would otherwise have that node run the call
// on its own drive at the same path, as every node has the same paths.
// A request without the header (an older client) is not checked, nor is
// one reaching a node that does not know its names (an older node).

// hdrNode is the host, as in the topology, of the node a request is for.
const hdrNode = "X-Strata-Node"

// ErrWrongNode: another node than the one addressed answered. It counts as
// the peer not answering (it is marked offline), and the client drops its
// idle connections so the next dial resolves the peer's name again.
var ErrWrongNode = errors.New("internode: another node answered")

// addressed names on req the node it is for.
func (p *Peer) addressed(req *http.Request) { req.Header.Set(hdrNode, p.Host) }

// misdirected says why a request is not for this node ("" when it is, or
// when that cannot be told).
func (s *Server) misdirected(r *http.Request) string {
	want := r.Header.Get(hdrNode)
	if want == "" || s.Names == nil {
		return ""
	}
	names := s.Names()
	if len(names) == 0 || slices.Contains(names, want) {
		return ""
	}
	return fmt.Sprintf("internode: this is %s, not %s", strings.Join(names, ", "), want)
}

// wrongNode turns a 421 answer into ErrWrongNode (nil otherwise).
func wrongNode(resp *http.Response, msg string) error {
	if resp.StatusCode != http.StatusMisdirectedRequest {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrWrongNode, msg)
}
