package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Credentials of the suite's conf template: main is root, alt and tenant are
// two more users (accounts of their own: usersFile).
const (
	mainKey, mainSecret     = "s3testmainkey", "s3testmainsecret1234"
	altKey, altSecret       = "s3testaltkey", "s3testaltsecret1234"
	tenantKey, tenantSecret = "s3testtenantkey", "s3testtenantsecret1234"
)

// runTarget starts a fresh strata for t, runs the suite against it, stops it
// and checks its output.
func runTarget(ctx context.Context, cfg *config, t target) (r result) {
	r.target = t.name
	start := time.Now()
	defer func() { r.duration = time.Since(start) }()
	problem := func(format string, args ...any) { r.problems = append(r.problems, fmt.Sprintf(format, args...)) }
	fail := func(format string, args ...any) result { problem(format, args...); return r }
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05"), t.name, fmt.Sprintf(format, args...))
	}

	outDir := filepath.Join(cfg.out, t.name)
	if err := os.RemoveAll(outDir); err != nil {
		return fail("wipe %s: %v", outDir, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fail("%v", err)
	}
	dir := filepath.Join(cfg.work, t.name)
	defer os.RemoveAll(dir)
	p, err := startStrata(cfg, t, dir, filepath.Join(outDir, "strata.log"))
	if err != nil {
		return fail("start strata: %v", err)
	}
	logf("strata %s on %s, waiting for readiness", p.cmd.Args[1], p.addr)
	if err := p.waitReady(ctx, map[bool]string{false: "http", true: "https"}[t.tls], 60*time.Second); err != nil {
		p.stop()
		return fail("%v (log: %s)", err, filepath.Join(outDir, "strata.log"))
	}

	logf("running s3-tests (output in %s)", outDir)
	summary, err := runSuite(ctx, cfg, t, p.addr, outDir, filepath.Join(dir, "tmp"))
	if err != nil {
		problem("%v", err)
	}
	if r.counts, r.ran = parseSummary(summary); !r.ran {
		problem("no summary line from run-s3-tests.sh; it printed:\n%s", indent(summary))
	}
	if r.tests, err = readJUnit(outDir, "main.xml", "lock.xml"); err != nil {
		problem("%v", err)
	} else if r.ran {
		for _, p := range retryLost(ctx, cfg, t, p.addr, outDir, filepath.Join(dir, "tmp"), &r, logf) {
			problem("%s", p)
		}
	}
	if exit := p.exited(); exit != "" {
		problem("strata exited during the run: %s", exit)
	} else if exit := p.stop(); exit != "exit status 0" {
		problem("strata did not stop cleanly on SIGTERM: %s", exit)
	}

	if bad, total, err := checkLog(filepath.Join(outDir, "strata.log")); err != nil {
		problem("strata.log: %v", err)
	} else if total > 0 {
		problem("%d lines of strata's stdout/stderr are not JSON log records, e.g.:\n%s", total, indent(strings.Join(bad, "\n")))
	}
	if r.tests != nil {
		if err := writeResults(filepath.Join(outDir, "results.txt"), r.tests); err != nil {
			problem("%v", err)
		}
	}
	logf("done: %d passed, %d failed, %d errors, %d skipped", r.counts.passed, r.counts.failed, r.counts.errors, r.counts.skipped)
	return r
}

// process is a running strata.
type process struct {
	cmd       *exec.Cmd
	addr      string        // 127.0.0.1:port
	done      chan struct{} // closed when the process has exited
	exitState string
}

// startStrata starts `strata server` on 4 fresh drives or `strata gateway` on
// a fresh root under dir, stdout and stderr both into logPath.
func startStrata(cfg *config, t target, dir, logPath string) (*process, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	users, addr := filepath.Join(dir, "users.json"), fmt.Sprintf("127.0.0.1:%d", ports[0])
	var args []string
	if t.gateway {
		args = []string{"gateway", "--address", addr, "--root", filepath.Join(dir, "root")}
		err = os.MkdirAll(filepath.Join(dir, "root"), 0o755)
	} else {
		args = []string{"server", "--address", addr, "--internode-port", strconv.Itoa(ports[1])}
		for i := 1; i <= 4 && err == nil; i++ {
			drive := filepath.Join(dir, fmt.Sprintf("d%d", i))
			args = append(args, drive)
			err = os.MkdirAll(drive, 0o755)
		}
	}
	if err != nil {
		return nil, err
	}
	if t.tls {
		certs := filepath.Join(dir, "certs")
		if err := writeSelfSignedCert(certs); err != nil {
			return nil, fmt.Errorf("certificate: %w", err)
		}
		args = append(args[:1], append([]string{"--certs-dir", certs}, args[1:]...)...)
	}
	if err := os.WriteFile(users, []byte(usersFile), 0o600); err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "keys.json")
	if err := writeKeysFile(keys); err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.strata, args...)
	cmd.Env = append(os.Environ(), "STRATA_ROOT_USER="+mainKey, "STRATA_ROOT_PASSWORD="+mainSecret, "STRATA_IAM_FILE="+users, "STRATA_KMS_KEYS_FILE="+keys)
	if cfg.kc != nil {
		// The tenant accepts the realm's tokens made for the suite's
		// client, as a Tenant's spec.webIdentity.providers would say.
		cmd.Env = append(cmd.Env, fmt.Sprintf(`STRATA_OIDC_AUDIENCES={%q:[%q]}`, keycloakIssuer, keycloakAudience))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with the runner, however it ends
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &process{cmd: cmd, addr: addr, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.exitState = "exit status 0"
		if err != nil {
			p.exitState = err.Error()
		}
		close(p.done)
	}()
	return p, nil
}

// exited says how the process ended, or "" while it runs.
func (p *process) exited() string {
	select {
	case <-p.done:
		return p.exitState
	default:
		return ""
	}
}

// stop sends SIGTERM, then SIGKILL after 20 s, and says how the process ended.
func (p *process) stop() string {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return "killed after 20 s (" + p.exitState + ")"
	}
	return p.exitState
}

func (p *process) waitReady(ctx context.Context, scheme string, limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // our own self-signed certificate
	}}
	defer client.CloseIdleConnections()
	url := scheme + "://" + p.addr + "/strata/health/ready"
	deadline := time.Now().Add(limit)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if exit := p.exited(); exit != "" {
			return fmt.Errorf("strata exited before it was ready: %s", exit)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not 200 after %s", url, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// unpassable are the tests deselected because they wait for something
// no S3 service does within the script's 120 s a test: together they were
// 3 of the server's 9 minutes of conformance in CI, and failed every time.
var unpassable = []string{
	// Sleeps 900 s (the shortest session STS grants) for its credentials
	// to expire; pytest-timeout ends it at 120 s.
	"s3tests/functional/test_sts.py::test_assume_role_creds_expiry",
	// Waits six of RGW's debug lifecycle days (rgw_lc_debug_interval,
	// 10 s); a lifecycle day is 24 hours here, as in S3 (TestLifecycle
	// runs the same case with a test-only day).
	"s3tests/functional/test_s3.py::test_delete_marker_expiration",
}

// runSuite runs the suite's script and returns what it printed. Its temporary
// files go to tmpDir, which is removed with the target's other files.
// pytestArgs go to pytest after the script's own.
func runSuite(ctx context.Context, cfg *config, t target, addr, outDir, tmpDir string, pytestArgs ...string) (string, error) {
	host, port, _ := net.SplitHostPort(addr)
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return "", err
	}
	// The SNS module is left out: it needs an SNS API, and its fixtures'
	// teardown errors once GetUser answers the account roots. So are the
	// tests that could only pass on a clock no S3 service keeps
	// (deselected).
	args := []string{host, port, mainKey, mainSecret, altKey, altSecret, tenantKey, tenantSecret, outDir,
		"--", "--ignore=s3tests/functional/test_sns.py"}
	for _, test := range unpassable {
		args = append(args, "--deselect="+test)
	}
	args = append(args, pytestArgs...)
	cmd := exec.CommandContext(ctx, filepath.Join(cfg.suite, "run-s3-tests.sh"), args...)
	useTLS := map[bool]string{false: "0", true: "1"}[t.tls]
	cmd.Env = append(os.Environ(), "S3TESTS_VENV="+cfg.venv, "S3_TLS="+useTLS, "TMPDIR="+tmpDir)
	if t.tls {
		// The suite's own clients verify nothing, but the clients some
		// tests make themselves (STS's) verify the server's certificate:
		// they trust it as any client given the tenant's CA bundle would.
		cmd.Env = append(cmd.Env, "AWS_CA_BUNDLE="+filepath.Join(filepath.Dir(tmpDir), "certs", "tls.crt"))
	}
	// A session of its own, so that an interrupt can reach pytest too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { signalSession(cmd.Process.Pid, syscall.SIGTERM); return nil }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("run-s3-tests.sh: %w", err)
	}
	return string(out), err
}

// signalSession signals every process of session sid: the script, and the
// timeout and pytest processes it starts, which timeout moves to a process
// group of their own.
func signalSession(sid int, sig syscall.Signal) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		pid, _ := strconv.Atoi(e.Name())
		if err != nil || pid == 0 {
			continue
		}
		// After "(comm)": state, ppid, pgrp, session.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 3 && f[3] == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, sig)
		}
	}
}

var summaryLine = regexp.MustCompile(`s3-tests: (\d+) passed, (\d+) failed, (\d+) errors, (\d+) skipped`)

func parseSummary(out string) (counts, bool) {
	m := summaryLine.FindStringSubmatch(out)
	if m == nil {
		return counts{}, false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return counts{passed: n(m[1]), failed: n(m[2]), errors: n(m[3]), skipped: n(m[4])}, true
}

// checkLog returns up to 20 lines of path that are not JSON objects (with
// their line numbers) and how many there are in all.
func checkLog(path string) (bad []string, total int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		if line := sc.Text(); !strings.HasPrefix(line, "{") || !json.Valid([]byte(line)) {
			if total++; len(bad) < 20 {
				bad = append(bad, fmt.Sprintf("line %d: %.300s", n, line))
			}
		}
	}
	return bad, total, sc.Err()
}

// testResult is one test case of the JUnit files.
type testResult struct{ name, status string }

var statusRank = map[string]int{"pass": 0, "skipped": 1, "failure": 2, "error": 3}

// readJUnit reads the JUnit files of outDir into tests named MODULE::TEST. A
// test listed twice (pytest can report a failing test's teardown error apart)
// keeps its worst status.
func readJUnit(outDir string, files ...string) ([]testResult, error) {
	status := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(outDir, file))
		if err != nil {
			return nil, fmt.Errorf("JUnit XML: %w", err)
		}
		var doc struct {
			Cases []struct {
				Classname string    `xml:"classname,attr"`
				Name      string    `xml:"name,attr"`
				Failure   *struct{} `xml:"failure"`
				Error     *struct{} `xml:"error"`
				Skipped   *struct{} `xml:"skipped"`
			} `xml:"testsuite>testcase"`
		}
		if err := xml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("JUnit XML %s: %w", file, err)
		}
		for _, tc := range doc.Cases {
			s := "pass"
			switch {
			case tc.Error != nil:
				s = "error"
			case tc.Failure != nil:
				s = "failure"
			case tc.Skipped != nil:
				s = "skipped"
			}
			name := tc.Classname[strings.LastIndex(tc.Classname, ".")+1:] + "::" + tc.Name
			if old, ok := status[name]; !ok || statusRank[s] > statusRank[old] {
				status[name] = s
			}
		}
	}
	var tests []testResult
	for name, s := range status {
		tests = append(tests, testResult{name: name, status: s})
	}
	slices.SortFunc(tests, func(a, b testResult) int { return strings.Compare(a.name, b.name) })
	return tests, nil
}

// writeResults writes "STATUS MODULE::TEST" lines sorted by test, for diffing runs.
func writeResults(path string, tests []testResult) error {
	var b strings.Builder
	for _, t := range tests {
		fmt.Fprintf(&b, "%-7s %s\n", t.status, t.name)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n { // all held open at once, so they differ
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// usersFile makes the suite's alt and tenant users accounts of their own
// (policy owner: their buckets are theirs, others grant them what their
// ACLs and policies say, as the suite expects of other accounts) and names
// root as the suite's conf names its main user (canonical ID and display
// name "main"). The IAM sections' keys are the conf template's own (the
// script fills in only main, alt and tenant): [iam] has root's rights in
// the tenant's account (it manages alt's policies), [iam root] and [iam
// alt root] are the roots of two IAM accounts with the template's IDs.
const usersFile = `{"root":{"id":"main","displayName":"main"},"users":[` +
	`{"accessKey":"` + altKey + `","secretKey":"` + altSecret + `","policy":"owner"},` +
	`{"accessKey":"` + tenantKey + `","secretKey":"` + tenantSecret + `","policy":"owner"},` +
	`{"accessKey":"s3testiamkey","secretKey":"s3testiamsecret1234","policy":"admin","id":"iamuser"},` +
	`{"accessKey":"s3testiamrootkey","secretKey":"s3testiamrootsecret1234","policy":"owner",` +
	`"account":"RGW11111111111111111","id":"RGW11111111111111111"},` +
	`{"accessKey":"s3testiamaltrootkey","secretKey":"s3testiamaltrootsecret1234","policy":"owner",` +
	`"account":"RGW22222222222222222","id":"RGW22222222222222222"}]}`

// writeKeysFile writes the master keys SSE-S3 and SSE-KMS use: the two key
// ids the suite names (its defaults, testkey-1 and testkey-2), random keys.
func writeKeysFile(path string) error {
	keys := map[string]string{}
	for _, id := range []string{"testkey-1", "testkey-2"} {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return err
		}
		keys[id] = base64.StdEncoding.EncodeToString(k)
	}
	data, err := json.Marshal(map[string]any{"default": "testkey-1", "keys": keys})
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// writeSelfSignedCert writes tls.crt and tls.key into dir: an ECDSA P-256
// certificate for 127.0.0.1 and localhost, valid for a day.
func writeSelfSignedCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "strata conformance"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (nothing)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
