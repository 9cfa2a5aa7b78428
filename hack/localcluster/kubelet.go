package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// kubeletPort is where each node serves the API server's log requests.
const kubeletPort = 10250

// serveContainerLogs answers the API server's `kubectl logs` requests for
// node n (GET /containerLogs/<namespace>/<pod>/<container>) from the
// container log files, on the node's address. The API server does not
// verify kubelet certificates unless told to, so a self-signed one serves.
func serveContainerLogs(ctx context.Context, log *slog.Logger, n int, logsDir string) error {
	cert, err := selfSigned(nodeName(n), nodeIP(n))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP(n), strconv.Itoa(kubeletPort)))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		file := filepath.Join(logsDir, fmt.Sprintf("%s_%s_%s.log", r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")))
		streamLog(r.Context(), w, file, r.URL.Query())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this node agent serves container logs only", http.StatusNotImplemented)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && err != http.ErrServerClosed {
			log.Warn("log server", "node", nodeName(n), "error", err)
		}
	}()
	return nil
}

// streamLog writes a container log honouring tailLines, limitBytes and
// follow (until the client goes away).
func streamLog(ctx context.Context, w http.ResponseWriter, file string, q map[string][]string) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f, err := os.Open(file)
	if err != nil {
		http.Error(w, "no log for this container (yet)", http.StatusNotFound)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if n, err := strconv.Atoi(get("tailLines")); err == nil && n >= 0 {
		lines := bytes.SplitAfter(data, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		data = bytes.Join(lines, nil)
	}
	if n, err := strconv.Atoi(get("limitBytes")); err == nil && n >= 0 && len(data) > n {
		data = data[:n]
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(data)
	if get("follow") != "true" {
		return
	}
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	rd := bufio.NewReader(f)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = w.Write(line)
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// selfSigned makes a serving certificate for a node's log server.
func selfSigned(name, ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
