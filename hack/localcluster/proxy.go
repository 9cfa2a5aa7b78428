package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// serviceProxy plays kube-proxy for TCP ClusterIP Services: it listens on
// every ClusterIP:port in the cluster namespace and forwards each connection
// to a ready endpoint of the Service (round robin), like kube-proxy's
// userspace mode of old.
type serviceProxy struct {
	log      *slog.Logger
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister

	mu        sync.Mutex
	listeners map[string]*svcListener // "ip:port" -> listener
	next      atomic.Uint64

	// failed: endpoints ("ip:port") a dial failed to, until when they are
	// passed over (see endpointFailWindow).
	failMu     sync.Mutex
	failed     map[string]time.Time
	failWindow time.Duration
}

type svcListener struct {
	ln        net.Listener
	namespace string
	service   string
	port      corev1.ServicePort
}

func newServiceProxy(log *slog.Logger, services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister) *serviceProxy {
	return &serviceProxy{log: log, services: services, slices: slices, listeners: map[string]*svcListener{},
		failed: map[string]time.Time{}, failWindow: endpointFailWindow}
}

// sync opens listeners for new Service ports and closes those of Services
// that are gone.
func (p *serviceProxy) sync() {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return
	}
	want := map[string]*svcListener{}
	for _, s := range svcs {
		ip := s.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		for _, port := range s.Spec.Ports {
			if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
				continue
			}
			addr := net.JoinHostPort(ip, strconv.Itoa(int(port.Port)))
			want[addr] = &svcListener{namespace: s.Namespace, service: s.Name, port: port}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, l := range p.listeners {
		w, ok := want[addr]
		if !ok || w.namespace != l.namespace || w.service != l.service {
			l.ln.Close()
			delete(p.listeners, addr)
			continue
		}
		l.port = w.port
	}
	for addr, w := range want {
		if _, ok := p.listeners[addr]; ok {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			p.log.Warn("service proxy cannot listen", "address", addr, "service", w.namespace+"/"+w.service, "error", err)
			continue
		}
		w.ln = ln
		p.listeners[addr] = w
		go p.serve(w)
	}
}

func (p *serviceProxy) serve(l *svcListener) {
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		port := l.port
		p.mu.Unlock()
		go p.forward(conn, l.namespace, l.service, port)
	}
}

// endpointDialTimeouts are the tries forward makes, each at the next ready
// endpoint, as kube-proxy's userspace mode did (250 ms, 500 ms, 1 s, 2 s):
// a connection to an endpoint whose process just died, before the node's
// loss marks it not ready, goes to another one instead of being reset.
var endpointDialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// endpointFailWindow: once a dial to an endpoint failed, new connections
// pass it over for this long while another endpoint is ready, as a load
// balancer's passive health check does (NGINX's upstream defaults,
// max_fails=1 and fail_timeout=10s). Without it, while a lost node's pods
// are still listed ready (until the node controller's grace period ends),
// every connection the round robin sends there first pays the first dial
// timeout: the day-2 test measured the gateways' p99 at 250-255 ms in each
// node loss, the 250 ms timeout itself.
const endpointFailWindow = 10 * time.Second

// forward connects conn to a ready endpoint of the Service port.
func (p *serviceProxy) forward(conn net.Conn, namespace, service string, port corev1.ServicePort) {
	tried := map[string]bool{}
	for _, timeout := range endpointDialTimeouts {
		target, err := p.endpoint(namespace, service, port, tried)
		if err != nil {
			break
		}
		tried[target] = true
		backend, err := dialTimeout(context.Background(), target, timeout)
		if err != nil {
			p.failMu.Lock()
			p.failed[target] = time.Now().Add(p.failWindow)
			p.failMu.Unlock()
			p.log.Debug("service endpoint refused; trying the next", "service", namespace+"/"+service, "endpoint", target, "err", err)
			continue
		}
		splice(conn, backend)
		return
	}
	conn.Close()
}

// endpoint picks a ready endpoint address of a Service port, in turn, past
// those tried already (all of them again once each was: a later try waits
// longer) and those a dial failed to in the last failWindow (unless no
// other is left). The addresses are sorted: the lister lists slices in no
// order, so without it a connection's tries could all land on one dead
// endpoint.
func (p *serviceProxy) endpoint(namespace, service string, port corev1.ServicePort, tried map[string]bool) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service})
	eps, err := p.slices.EndpointSlices(namespace).List(sel)
	if err != nil {
		return "", err
	}
	var addrs []string
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var target int32
		for _, sp := range s.Ports {
			name := ""
			if sp.Name != nil {
				name = *sp.Name
			}
			if sp.Port != nil && name == port.Name {
				target = *sp.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				addrs = append(addrs, net.JoinHostPort(a, strconv.Itoa(int(target))))
			}
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("service %s/%s has no ready endpoint", namespace, service)
	}
	slices.Sort(addrs)
	if untried := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return tried[a] }); len(untried) > 0 {
		addrs = untried
	}
	now := time.Now()
	p.failMu.Lock()
	healthy := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return p.failed[a].After(now) })
	for a, until := range p.failed {
		if !until.After(now) {
			delete(p.failed, a)
		}
	}
	p.failMu.Unlock()
	if len(healthy) > 0 {
		addrs = healthy
	}
	return addrs[p.next.Add(1)%uint64(len(addrs))], nil
}

// port is the Service's port of that name (the first one for ""), for host
// exposures.
func (p *serviceProxy) port(namespace, service, name string) (corev1.ServicePort, error) {
	s, err := p.services.Services(namespace).Get(service)
	if err != nil {
		return corev1.ServicePort{}, err
	}
	for _, port := range s.Spec.Ports {
		if name == "" || port.Name == name {
			return port, nil
		}
	}
	return corev1.ServicePort{}, fmt.Errorf("service %s/%s has no port %q", namespace, service, name)
}

func (p *serviceProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, l := range p.listeners {
		l.ln.Close()
		delete(p.listeners, addr)
	}
}

// exposeService serves a listener of the host (made by the outer process in
// the host's network namespace and handed down) with the Service's
// endpoints: the host reaches the tenant at 127.0.0.1 without any route
// into the cluster's network.
func exposeService(ln net.Listener, p *serviceProxy, namespace, service, portName string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			port, err := p.port(namespace, service, portName)
			if err != nil {
				conn.Close()
				return
			}
			p.forward(conn, namespace, service, port)
		}()
	}
}

// exposeAddress forwards a host listener to a fixed address in the cluster
// namespace (the API server).
func exposeAddress(ln net.Listener, addr string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			backend, err := dialTimeout(context.Background(), addr, 5*time.Second)
			if err != nil {
				conn.Close()
				return
			}
			splice(conn, backend)
		}()
	}
}

// splice copies both ways until either side is done, passing half-closes on.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
