package engine

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// formFileRead is how much of a refused form's file the server may read:
// its form parser's buffers, never the file.
const formFileRead = 64 << 10

// TestUnauthenticatedForms: 100 unsigned POST object forms at once, each a
// key field then a file part declared 2 GiB long and streamed as fast as
// the server takes it, against a server and a gateway. Each is refused
// (403 AccessDenied: no policy, no signature, a private bucket) before
// more than 64 KiB of its file is read: the server's bytes read
// (/proc/<pid>/io rchar) grow by no more than 100 × (64 KiB + the form's
// header) plus what the process reads when idle. Nothing is written to
// disk (its data directories hold the same bytes, its TMPDIR stays empty,
// wchar grows by little more than the answers), and its peak RSS grows by
// less than 32 MiB.
func TestUnauthenticatedForms(t *testing.T) {
	const forms, fileSize = 100, 2 << 30
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			begun := time.Now()
			tmp := t.TempDir()
			s, dataDirs := startServerOrGateway(t, kind, "TMPDIR="+tmp)
			mustCreateBucket(t, s.aws(), "forms")
			pid := s.cmd.Process.Pid
			// What the process reads and writes of itself while idle
			// (drive checks, the metadata store) is allowed for.
			idle0 := procIO(t, pid)
			time.Sleep(time.Second)
			idle1 := procIO(t, pid)
			idleRead, idleWritten := idle1["rchar"]-idle0["rchar"], idle1["wchar"]-idle0["wchar"]

			files0, bytes0 := treeSize(dataDirs)
			peak0 := procStatusKiB(pid, "VmHWM")
			io0 := procIO(t, pid)
			attackBegun := time.Now()
			results := unsignedForms(s.addr, "forms", forms, fileSize)
			attack := time.Since(attackBegun)
			io1 := procIO(t, pid)
			peak1 := procStatusKiB(pid, "VmHWM")
			files1, bytes1 := treeSize(dataDirs)

			answers := map[string]int{}
			var pushed int64
			for _, r := range results {
				answers[r.answer()]++
				pushed += r.sent
			}
			if answers["403 AccessDenied"] != forms {
				t.Errorf("answers to %d unsigned forms: %v, want 403 AccessDenied to each", forms, answers)
			}
			read, written := io1["rchar"]-io0["rchar"], io1["wchar"]-io0["wchar"]
			allowed := int64(forms*(formFileRead+formHeaderBytes())) + idleRead*int64(attack/time.Second+2) + 64<<10
			if read > allowed {
				t.Errorf("the %s read %d bytes during the attack, more than %d (64 KiB of each file, its header, and what it reads idle)", kind, read, allowed)
			}
			if files1 != files0 || bytes1 != bytes0 {
				t.Errorf("the data directories went from %d files, %d bytes to %d files, %d bytes", files0, bytes0, files1, bytes1)
			}
			if n := filesUnder(t, tmp); n != 0 {
				t.Errorf("%d files written to TMPDIR", n)
			}
			if limit := int64(forms*4<<10) + idleWritten*int64(attack/time.Second+2) + 256<<10; written > limit {
				t.Errorf("the %s wrote %d bytes during the attack (sockets, pipes, files), more than %d", kind, written, limit)
			}
			if grew := peak1 - peak0; grew >= 32<<10 {
				t.Errorf("peak RSS grew by %d KiB during the attack (target < 32 MiB)", grew)
			}
			list, err := s.aws().ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String("forms")})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Contents) != 0 {
				t.Errorf("%d objects stored by unsigned forms", len(list.Contents))
			}
			t.Logf("%s: %d unsigned forms of 2 GiB: answers %v in %v; %d bytes of files pushed into the sockets; the server read %d bytes (%d a form, a form's header %d bytes; idle %d B/s) and wrote %d (idle %d B/s); data directories %d files, %d bytes, unchanged: %v; TMPDIR files %d; peak RSS %d -> %d KiB (+%d KiB); %v in all",
				kind, forms, answers, attack.Round(time.Millisecond), pushed, read, read/forms, formHeaderBytes(), idleRead, written, idleWritten,
				files1, bytes1, files1 == files0 && bytes1 == bytes0, filesUnder(t, tmp), peak0, peak1, peak1-peak0, time.Since(begun).Round(time.Second))
		})
	}
}

// formAttempt is what one unsigned form got.
type formAttempt struct {
	status int
	code   string
	err    error
	// sent counts the file's bytes written into the connection.
	sent int64
}

func (a formAttempt) answer() string {
	if a.status == 0 {
		return fmt.Sprintf("no answer (%v)", a.err)
	}
	return strings.TrimSpace(strconv.Itoa(a.status) + " " + a.code)
}

const formBoundary = "strataformboundary"

// formHead is a form's HTTP header and its fields up to the file's bytes.
func formHead(addr, bucket string, fileSize int64) []byte {
	fields := "--" + formBoundary + "\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nobj\r\n--" + formBoundary +
		"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + formBoundary + "--\r\n"
	return fmt.Appendf(nil, "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n%s",
		bucket, addr, formBoundary, int64(len(fields))+fileSize+int64(len(tail)), fields)
}

// formHeaderBytes is the length of the attack's form heads.
func formHeaderBytes() int { return len(formHead("127.0.0.1:65535", "forms", 2<<30)) }

// unsignedForms sends n unsigned forms at once, from 127.0.3.x, each
// streaming its file until the server answers or closes.
func unsignedForms(addr, bucket string, n int, fileSize int64) []formAttempt {
	results := make([]formAttempt, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 3, byte(1+i%250))}
			<-start
			results[i] = unsignedForm(addr, src, bucket, fileSize)
		}()
	}
	close(start)
	wg.Wait()
	return results
}

// unsignedForm sends one form from src: its head, then its file's bytes
// while the server takes them, and reads the answer.
func unsignedForm(addr string, src *net.TCPAddr, bucket string, fileSize int64) formAttempt {
	conn, err := (&net.Dialer{LocalAddr: src, Timeout: 10 * time.Second}).Dial("tcp", addr)
	if err != nil {
		return formAttempt{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	var sent atomic.Int64
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := conn.Write(formHead(addr, bucket, fileSize)); err != nil {
			return
		}
		block := bytes.Repeat([]byte("A"), 64<<10)
		for sent.Load() < fileSize {
			n, err := conn.Write(block[:min(int64(len(block)), fileSize-sent.Load())])
			sent.Add(int64(n))
			if err != nil {
				return // answered and closed
			}
		}
	}()
	a := formAttempt{}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		a.err = err
	} else {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		var e struct{ Code string }
		_ = xml.Unmarshal(body, &e)
		a.status, a.code = resp.StatusCode, e.Code
	}
	conn.Close()
	<-wrote
	a.sent = sent.Load()
	return a
}

// procIO is /proc/<pid>/io: rchar and wchar count the bytes passed to
// read and write calls, sockets and pipes included.
func procIO(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			out[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}

// treeSize counts the regular files under dirs and their bytes.
func treeSize(dirs []string) (files int, size int64) {
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					files++
					size += info.Size()
				}
			}
			return nil
		})
	}
	return files, size
}
