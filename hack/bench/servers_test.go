package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinary writes a shell script standing in for a server binary.
func fakeBinary(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartServerNotImplemented(t *testing.T) {
	bin := fakeBinary(t, `echo "strata $1: not implemented in this build yet" >&2; exit 1`)
	dir := t.TempDir()
	_, err := startServer(context.Background(), strataServerKind(bin, nil), filepath.Join(dir, "data"), filepath.Join(dir, "log"))
	if !errors.Is(err, errNotImplemented) {
		t.Fatalf("startServer = %v, want errNotImplemented", err)
	}
	for i := 1; i <= 4; i++ {
		if _, err := os.Stat(filepath.Join(dir, "data", "d"+string(rune('0'+i)))); err != nil {
			t.Errorf("drive directory d%d not created: %v", i, err)
		}
	}
}

func TestStartServerCrash(t *testing.T) {
	bin := fakeBinary(t, `echo "listen: address already in use"; exit 3`)
	dir := t.TempDir()
	_, err := startServer(context.Background(), strataGatewayKind(bin, nil), filepath.Join(dir, "root"), filepath.Join(dir, "log"))
	if err == nil || errors.Is(err, errNotImplemented) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("startServer = %v, want a start-up failure quoting the log", err)
	}
}

func TestStartServerMissingBinary(t *testing.T) {
	dir := t.TempDir()
	if _, err := startServer(context.Background(), minioKind(filepath.Join(dir, "nope")), dir, filepath.Join(dir, "log")); err == nil {
		t.Fatal("a missing binary started")
	}
}

func TestServerArgs(t *testing.T) {
	port := func() (int, error) { return 9001, nil }
	root := t.TempDir()
	for _, c := range []struct {
		kind serverKind
		want string
	}{
		{minioKind("minio"), "server --quiet --address 127.0.0.1:9000 --console-address 127.0.0.1:9001 " + root + "/d{1...4}"},
		{versitygwKind("versitygw", true), "--port 127.0.0.1:9000 --quiet --keep-alive posix " + root},
		{versitygwKind("versitygw", false), "--port 127.0.0.1:9000 --quiet posix " + root},
		{strataServerKind("strata", nil), "server --address 127.0.0.1:9000 " + root + "/d{1...4}"},
		{strataServerKind("strata", []string{"--no-sync"}), "server --address 127.0.0.1:9000 --no-sync " + root + "/d{1...4}"},
		{strataGatewayKind("strata", nil), "gateway --address 127.0.0.1:9000 --root " + root},
	} {
		args, err := c.kind.args("127.0.0.1:9000", root, port)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(args, " "); got != c.want {
			t.Errorf("%s args = %q, want %q", c.kind.name, got, c.want)
		}
	}
}

func TestServerEnvDropsInheritedSettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy:3128")
	t.Setenv("MINIO_ROOT_USER", "someone")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("BENCH_KEEP", "1")
	t.Setenv("STRATA_PPROF_ADDR", "127.0.0.1:6060")
	env := strings.Join(serverEnv(), "\n")
	for _, gone := range []string{"HTTP_PROXY", "MINIO_ROOT_USER", "AWS_SECRET_ACCESS_KEY"} {
		if strings.Contains(env, gone+"=") {
			t.Errorf("%s leaked into the server environment", gone)
		}
	}
	if !strings.Contains(env, "BENCH_KEEP=1") || !strings.Contains(env, "STRATA_PPROF_ADDR=") {
		t.Error("ordinary variables were dropped")
	}
}
