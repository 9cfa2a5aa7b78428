package s3http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdChildEnv makes the test binary the server of TestDescriptorExhaustion.
const fdChildEnv = "S3HTTP_FD_CHILD"

// When accept runs out of descriptors the server sheds a trickler and
// accepts, instead of sleeping while the flood holds every descriptor. The
// server runs in a child process so it can lower its own RLIMIT_NOFILE.
func TestDescriptorExhaustion(t *testing.T) {
	if os.Getenv(fdChildEnv) == "1" {
		descriptorChild(t)
		return
	}
	if testing.Short() {
		t.Skip("floods a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDescriptorExhaustion$")
	cmd.Env = append(os.Environ(), fdChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// For the paths that fail before Wait; after it the child is gone and
	// Kill says so.
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(stdout)
	field := func(prefix string) string {
		for lines.Scan() {
			if v, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				return v
			}
		}
		t.Fatalf("child printed no %q line", prefix)
		return ""
	}
	addr := field("ADDR ")

	const flood = 400
	for range flood {
		dialTrickler(t, addr, 500*time.Millisecond)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 20 {
		if err := get(client, "http://"+addr+"/b/k"); err != nil {
			t.Fatalf("request %d during the flood: %v", i, err)
		}
	}
	stdin.Close()
	var st Stats
	if err := json.Unmarshal([]byte(field("STATS ")), &st); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	t.Logf("child stats: %+v", st)
	if st.ShedNoDescriptors == 0 {
		t.Error("no connection was shed for want of descriptors")
	}
}

// descriptorChild serves with 256 descriptors and no connection limit of
// its own until stdin closes, then prints its stats.
func descriptorChild(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	rl.Cur = 256
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Config{
		Handler: okHandler,
		Limits:  Limits{MaxConnections: 100000, HeaderTimeout: time.Minute},
	})
	fmt.Printf("ADDR %s\n", ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		var b [1]byte
		// Returns (io.EOF) when the parent closes our stdin: the signal
		// itself, whatever the error.
		_, _ = os.Stdin.Read(b[:])
		cancel()
	}()
	<-ctx.Done()
	out, _ := json.Marshal(ts.Stats())
	fmt.Printf("STATS %s\n", out)
}
