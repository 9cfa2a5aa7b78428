package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkClientHead measures what one HEAD costs the load generator
// itself, against a server that answers instantly: the budget the client
// takes from the server under test on a 2-core machine.
func BenchmarkClientHead(b *testing.B) {
	b.Run("lean", func(b *testing.B) { benchmarkClientHead(b, ClientOptions{Concurrency: 1}) })
	b.Run("full-sdk", func(b *testing.B) { benchmarkClientHead(b, ClientOptions{Concurrency: 1, FullSDK: true}) })
}

func benchmarkClientHead(b *testing.B, o ClientOptions) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "4096")
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	t := Target{Name: "fake", Endpoints: []string{srv.URL}, AccessKey: "a", SecretKey: "b"}
	c := newS3Clients(t, o, newTransport(1))[0]
	w := newWorker(0, c, "bucket", "prefix", 4096, make([]byte, 4096))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := w.head(ctx, "prefix/p00/00000000"); err != nil {
			b.Fatal(err)
		}
	}
}
