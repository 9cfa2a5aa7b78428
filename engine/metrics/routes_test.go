package metrics

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/backend"
	vmetrics "github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"
)

// actions records the API the front end's router reports for each request,
// through the metrics interface it calls once per request.
type actions struct {
	mu   sync.Mutex
	last map[string]string // X-Test-Id -> action
}

func (a *actions) Send(c fiber.Ctx, _ error, action string, _ int64, _ int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[c.Get("X-Test-Id")] = action
}

func (*actions) Close() {}

// frontEnd serves versitygw's router (over a backend that implements
// nothing: the routing, not the answer, is under test) on loopback.
func frontEnd(t *testing.T) (string, *actions) {
	t.Helper()
	rec := &actions{last: map[string]string{}}
	srv, err := s3api.New(backend.BackendUnsupported{}, middlewares.RootUserConfig{Access: "root", Secret: "rootsecret"},
		"us-east-1", nil, nil, nil, nil, rec, s3api.WithQuiet(), s3api.WithConcurrencyLimiter(64, 64))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	go func() { _ = srv.ServeMultiPort([]string{addr}) }()
	t.Cleanup(func() { _ = srv.ShutDown() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the front end did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addr, rec
}

// ourName is the name our metrics use for one of the router's actions.
func ourName(action string) string {
	switch action {
	case vmetrics.ActionUndetected:
		return unknown
	case vmetrics.ActionListAllMyBuckets:
		return "ListBuckets"
	}
	return strings.TrimPrefix(action, "s3_")
}

// request builds a request that matches rt (and no earlier route of the
// same method and level with fewer conditions).
func request(base string, rt route) (*http.Request, string) {
	path := "/bkt"
	if rt.object {
		path += "/dir/obj"
	}
	q := url.Values{}
	for _, k := range rt.query {
		q.Set(k, "1")
	}
	if rt.queryValue[0] != "" {
		q.Set(rt.queryValue[0], rt.queryValue[1])
	}
	raw := path
	if len(q) > 0 {
		raw += "?" + q.Encode()
	}
	req, _ := http.NewRequest(rt.method, base+raw, nil)
	if rt.copySource {
		req.Header.Set("X-Amz-Copy-Source", "src/obj")
	}
	return req, raw
}

// TestRoutesMatchTheFrontEnd: for every route of the table, a request sent
// to the front end's real router is reported as the API the table names
// and APIName agrees; and every S3 API the router knows has a route, so a
// new front end version with new APIs fails here until the table has them.
func TestRoutesMatchTheFrontEnd(t *testing.T) {
	base, rec := frontEnd(t)
	client := &http.Client{Timeout: 10 * time.Second}
	covered := map[string]bool{}
	for i, rt := range routes {
		req, raw := request(base, rt)
		id := strconv.Itoa(i)
		req.Header.Set("X-Test-Id", id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.method, raw, err)
		}
		resp.Body.Close()
		rec.mu.Lock()
		action, ok := rec.last[id]
		rec.mu.Unlock()
		if !ok {
			t.Errorf("%s %s (copy source %v): the router reported no API", rt.method, raw, rt.copySource)
			continue
		}
		covered[action] = true
		u, _ := url.Parse(raw)
		args := fasthttp.AcquireArgs()
		args.Parse(u.RawQuery)
		got := APIName(rt.method, u.Path, args, rt.copySource)
		fasthttp.ReleaseArgs(args)
		if want := ourName(action); rt.name != want || got != want {
			t.Errorf("%s %s (copy source %v): router says %s, table %s, APIName %s", rt.method, raw, rt.copySource, want, rt.name, got)
		}
	}
	for action := range vmetrics.ActionMap {
		if !strings.HasPrefix(action, "s3_") || covered[action] {
			continue
		}
		switch action {
		case vmetrics.ActionListAllMyBuckets, vmetrics.ActionOptions: // not bucket or object routes; see TestAPINameSpecialCases
			continue
		}
		t.Errorf("the router knows %s, the route table does not", action)
	}
}

// TestAPINameSpecialCases: the service level and CORS preflights.
func TestAPINameSpecialCases(t *testing.T) {
	args := fasthttp.AcquireArgs()
	defer fasthttp.ReleaseArgs(args)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/", "ListBuckets"},
		{"PUT", "/", unknown},
		{"OPTIONS", "/bkt", "Options"},
		{"OPTIONS", "/bkt/obj", "Options"},
		{"GET", "//bkt//a/b", "GetObject"},
		{"PATCH", "/bkt/obj", unknown},
	} {
		if got := APIName(c.method, c.path, args, false); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.method, c.path, got, c.want)
		}
	}
}
