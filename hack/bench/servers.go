package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Credentials every server under test is started with. They only ever
// guard throwaway servers on 127.0.0.1.
const (
	benchUser     = "benchadmin"
	benchPassword = "benchadmin-secret"
)

const (
	startTimeout = 90 * time.Second
	stopTimeout  = 15 * time.Second
)

// serverKind says how to start one kind of server on a fresh directory.
type serverKind struct {
	name        string
	description string
	binary      string
	versionArgs []string
	// layout creates what the server needs under root and returns its
	// command-line arguments for listening on addr.
	args func(addr, root string, freePort func() (int, error)) ([]string, error)
	env  []string
	// healthPath, when set, must answer 200 before the server counts as up
	// (an S3 ListBuckets must succeed too).
	healthPath string
	// bucketEncryption, when set, is the benchmark bucket's default
	// encryption (clients send no encryption headers).
	bucketEncryption string
	// accessKey and secretKey, when set, replace benchUser and
	// benchPassword (a server with its own key format).
	accessKey, secretKey string
	// setup, when set, runs once the process started and before S3 is
	// waited for: what a server needs done through its own tools before
	// it serves (Garage's layout and key).
	setup func(ctx context.Context, root string) error
}

func driveDirs(root string, n int) error {
	for i := 1; i <= n; i++ {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func minioKind(bin string) serverKind {
	return serverKind{
		name:        "minio",
		description: "MinIO, 4 drive directories, EC 2+2",
		binary:      bin,
		versionArgs: []string{"--version"},
		args: func(addr, root string, freePort func() (int, error)) ([]string, error) {
			if err := driveDirs(root, 4); err != nil {
				return nil, err
			}
			console, err := freePort()
			if err != nil {
				return nil, err
			}
			return []string{"server", "--quiet", "--address", addr,
				"--console-address", fmt.Sprintf("127.0.0.1:%d", console),
				filepath.Join(root, "d{1...4}")}, nil
		},
		env: []string{
			"MINIO_ROOT_USER=" + benchUser,
			"MINIO_ROOT_PASSWORD=" + benchPassword,
			"MINIO_STORAGE_CLASS_STANDARD=EC:2",
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			// The drive directories share the root filesystem, which MinIO
			// refuses outside CI mode; CI mode (MINIO_CI_CD) would also
			// shrink its buffer pool, so lower the root-drive threshold
			// instead and keep the production memory sizing.
			"MINIO_ROOTDRIVE_THRESHOLD_SIZE=1B",
		},
		healthPath: "/minio/health/ready",
	}
}

// versitygwKind runs VersityGW's posix backend. keepAlive matters: without
// --keep-alive VersityGW closes the connection after every response, and a
// TCP handshake per request is not what we want to compare against.
func versitygwKind(bin string, keepAlive bool) serverKind {
	desc := "VersityGW posix (no fsync)"
	if !keepAlive {
		desc += ", keep-alive off"
	}
	return serverKind{
		name:        "versitygw",
		description: desc,
		binary:      bin,
		versionArgs: []string{"--version"},
		args: func(addr, root string, _ func() (int, error)) ([]string, error) {
			if err := os.MkdirAll(root, 0o755); err != nil {
				return nil, err
			}
			args := []string{"--port", addr, "--quiet"}
			if keepAlive {
				args = append(args, "--keep-alive")
			}
			return append(args, "posix", root), nil
		},
		env: []string{
			"ROOT_ACCESS_KEY=" + benchUser,
			"ROOT_SECRET_KEY=" + benchPassword,
		},
	}
}

// Garage's key formats: an access key is GK and 24 hex digits, a secret 64
// hex digits. Like the others, these only guard a throwaway server.
const (
	garageAccessKey = "GK0123456789abcdef01234567"
	garageSecretKey = "6265e6368616461646d696e2d7365637265742d6f662d61206265e636800001"
)

// garageKind runs Garage as issue 36 measured it: one node, one copy
// (replication_factor 1), data and metadata synced (data_fsync and
// metadata_fsync on), LMDB metadata. Before it serves S3 its node needs a
// layout role and the benchmark key, made with its own CLI (setup).
func garageKind(bin string) serverKind {
	config := func(root string) string { return filepath.Join(root, "garage.toml") }
	return serverKind{
		name:        "garage",
		description: "Garage, single node, one copy, data and metadata fsync",
		binary:      bin,
		versionArgs: []string{"--version"},
		accessKey:   garageAccessKey,
		secretKey:   garageSecretKey,
		args: func(addr, root string, freePort func() (int, error)) ([]string, error) {
			rpc, err := freePort()
			if err != nil {
				return nil, err
			}
			admin, err := freePort()
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(root, 0o755); err != nil {
				return nil, err
			}
			secret := make([]byte, 32)
			if _, err := rand.Read(secret); err != nil {
				return nil, err
			}
			doc := fmt.Sprintf(`metadata_dir = %q
data_dir = %q
db_engine = "lmdb"
metadata_fsync = true
data_fsync = true
replication_factor = 1
rpc_bind_addr = "127.0.0.1:%d"
rpc_public_addr = "127.0.0.1:%d"
rpc_secret = "%x"

[s3_api]
s3_region = "us-east-1"
api_bind_addr = %q
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:%d"
`, filepath.Join(root, "meta"), filepath.Join(root, "data"), rpc, rpc, secret, addr, admin)
			if err := os.WriteFile(config(root), []byte(doc), 0o600); err != nil {
				return nil, err
			}
			return []string{"-c", config(root), "server"}, nil
		},
		setup: func(ctx context.Context, root string) error {
			garage := func(args ...string) (string, error) {
				out, err := exec.CommandContext(ctx, bin, append([]string{"-c", config(root)}, args...)...).CombinedOutput()
				if err != nil {
					return "", fmt.Errorf("garage %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
				}
				return strings.TrimSpace(string(out)), nil
			}
			// The node answers its CLI once its RPC listener is up: `node
			// id` may answer from the node's key on disk before that, so
			// `status` (an RPC) is waited for as well (a run of 2026-12-01
			// had layout assign refused).
			var id string
			for _, args := range [][]string{{"node", "id", "-q"}, {"status"}} {
				for {
					out, err := garage(args...)
					if err == nil {
						if id == "" {
							id, _, _ = strings.Cut(out, "@")
						}
						break
					}
					select {
					case <-ctx.Done():
						return err
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
			for _, args := range [][]string{
				{"layout", "assign", "-z", "dc1", "-c", "100G", id},
				{"layout", "apply", "--version", "1"},
				{"key", "import", "--yes", "-n", "bench", garageAccessKey, garageSecretKey},
				{"key", "allow", "--create-bucket", garageAccessKey},
			} {
				if _, err := garage(args...); err != nil {
					return err
				}
			}
			return nil
		},
		env: []string{"RUST_LOG=warn"},
	}
}

func strataServerKind(bin string, extra []string) serverKind {
	desc := "strata server, 4 drive directories (2+2)"
	if len(extra) > 0 {
		desc += ", " + strings.Join(extra, " ")
	}
	return serverKind{
		name:        "strata",
		description: desc,
		binary:      bin,
		versionArgs: []string{"version"},
		args: func(addr, root string, _ func() (int, error)) ([]string, error) {
			if err := driveDirs(root, 4); err != nil {
				return nil, err
			}
			args := append([]string{"server", "--address", addr}, extra...)
			return append(args, filepath.Join(root, "d{1...4}")), nil
		},
		env: []string{
			"STRATA_ROOT_USER=" + benchUser,
			"STRATA_ROOT_PASSWORD=" + benchPassword,
		},
		healthPath: "/strata/health/ready",
	}
}

// strataSSEKind is strataServerKind with a master key (written to a file
// in dir) and the benchmark bucket encrypted by default with SSE-S3: what
// encryption costs.
func strataSSEKind(bin string, extra []string, dir string) (serverKind, error) {
	k := strataServerKind(bin, extra)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return k, err
	}
	doc := fmt.Sprintf(`{"default": "bench", "keys": {"bench": %q}}`, base64.StdEncoding.EncodeToString(key))
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keys, []byte(doc), 0o600); err != nil {
		return k, err
	}
	k.name = "strata-sse-s3"
	k.description += "; bucket default encryption SSE-S3"
	k.env = append(k.env, "STRATA_KMS_KEYS_FILE="+keys)
	k.bucketEncryption = "AES256"
	return k, nil
}

func strataGatewayKind(bin string, extra []string) serverKind {
	desc := "strata gateway (posix)"
	if len(extra) > 0 {
		desc += ", " + strings.Join(extra, " ")
	}
	return serverKind{
		name:        "strata",
		description: desc,
		binary:      bin,
		versionArgs: []string{"version"},
		args: func(addr, root string, _ func() (int, error)) ([]string, error) {
			if err := os.MkdirAll(root, 0o755); err != nil {
				return nil, err
			}
			args := append([]string{"gateway", "--address", addr}, extra...)
			return append(args, "--root", root), nil
		},
		env: []string{
			"STRATA_ROOT_USER=" + benchUser,
			"STRATA_ROOT_PASSWORD=" + benchPassword,
		},
		healthPath: "/strata/health/ready",
	}
}

// errNotImplemented marks a server binary that exists but says its mode is
// not implemented yet (strata before the engine lands).
var errNotImplemented = errors.New("not implemented in this build")

// serverProcess is one running server.
type serverProcess struct {
	kind     serverKind
	cmd      *exec.Cmd
	endpoint string
	logPath  string
	exited   chan struct{}
	waitErr  error
}

// freePort asks the kernel for an unused loopback port. Another process may
// take it before the server binds it; start then fails loudly, not silently.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts kind on a fresh port with its data under root, logging
// to logPath, and waits until it serves S3.
func startServer(ctx context.Context, kind serverKind, root, logPath string) (*serverProcess, error) {
	if _, err := os.Stat(kind.binary); err != nil {
		return nil, fmt.Errorf("%s: %w", kind.name, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args, err := kind.args(addr, root, freePort)
	if err != nil {
		return nil, fmt.Errorf("%s: preparing %s: %w", kind.name, root, err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(kind.binary, args...)
	cmd.Env = append(serverEnv(), kind.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, and killed with us if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: %w", kind.name, err)
	}
	p := &serverProcess{kind: kind, cmd: cmd, endpoint: "http://" + addr, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx, root); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// serverEnv is our environment without proxy settings or credentials a
// server might pick up on its own; STRATA_PPROF_ADDR passes through.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if upper == "STRATA_PPROF_ADDR" {
			env = append(env, kv) // profiling a benchmark run is the point of it
			continue
		}
		if strings.HasSuffix(upper, "_PROXY") || strings.HasPrefix(upper, "MINIO_") ||
			strings.HasPrefix(upper, "STRATA_") || strings.HasPrefix(upper, "VGW_") ||
			strings.HasPrefix(upper, "AWS_") || strings.HasPrefix(upper, "ROOT_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (p *serverProcess) waitReady(ctx context.Context, root string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	exitedEarly := func() error {
		tail := logTail(p.logPath, 2048)
		if strings.Contains(strings.ToLower(tail), "not implemented") {
			return fmt.Errorf("%s: %w: %s", p.kind.name, errNotImplemented, strings.TrimSpace(tail))
		}
		status := "exit status 0"
		if p.waitErr != nil {
			status = p.waitErr.Error()
		}
		return fmt.Errorf("%s exited during start-up (%s); log %s ends:\n%s", p.kind.name, status, p.logPath, tail)
	}
	if p.kind.healthPath != "" {
		client := &http.Client{Timeout: 2 * time.Second}
		for {
			resp, err := client.Get(p.endpoint + p.kind.healthPath)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-p.exited:
				return exitedEarly()
			case <-ctx.Done():
				return fmt.Errorf("%s not ready after %s; log %s", p.kind.name, startTimeout, p.logPath)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if p.kind.setup != nil {
		setupDone := make(chan error, 1)
		go func() { setupDone <- p.kind.setup(ctx, root) }()
		select {
		case <-p.exited:
			return exitedEarly()
		case err := <-setupDone:
			if err != nil {
				return fmt.Errorf("%s: setting up: %w; log %s", p.kind.name, err, p.logPath)
			}
		}
	}
	c := newS3Clients(p.target(), ClientOptions{Concurrency: 1}, newTransport(1))[0]
	s3Ready := make(chan error, 1)
	go func() { s3Ready <- waitS3(ctx, c) }()
	select {
	case <-p.exited:
		return exitedEarly()
	case err := <-s3Ready:
		if err != nil {
			return fmt.Errorf("%s does not answer S3 ListBuckets: %s; log %s", p.kind.name, errorCode(err), p.logPath)
		}
		return nil
	}
}

// stop asks the server to exit, then kills its process group.
func (p *serverProcess) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// target is how clients reach the server.
func (p *serverProcess) target() Target {
	t := Target{Name: p.kind.name, Endpoints: []string{p.endpoint}, AccessKey: benchUser, SecretKey: benchPassword}
	if p.kind.accessKey != "" {
		t.AccessKey, t.SecretKey = p.kind.accessKey, p.kind.secretKey
	}
	return t
}

// scratchServer is a server on fresh directories of its own, its log
// among them: close stops it and removes them all.
type scratchServer struct {
	*serverProcess
	root string
}

// startScratch starts kind on a new directory under tmp ("": $TMPDIR),
// logging to logPath ("": a file in that directory).
func startScratch(ctx context.Context, kind serverKind, tmp, logPath string) (*scratchServer, error) {
	root, err := os.MkdirTemp(tmp, "strata-bench-"+kind.name+"-")
	if err != nil {
		return nil, err
	}
	if logPath == "" {
		logPath = filepath.Join(root, kind.name+".log")
	}
	p, err := startServer(ctx, kind, filepath.Join(root, "data"), logPath)
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return &scratchServer{serverProcess: p, root: root}, nil
}

// dataDir is where the server keeps its data (its drives, for a server
// with several).
func (s *scratchServer) dataDir() string { return filepath.Join(s.root, "data") }

func (s *scratchServer) close() {
	s.stop()
	os.RemoveAll(s.root)
}

// binaryVersion runs the binary's version command and returns its first
// line, or "" when that fails.
func binaryVersion(kind serverKind) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kind.binary, kind.versionArgs...).CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// logTail returns up to n bytes from the end of the file at path.
func logTail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
