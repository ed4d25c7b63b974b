// Package warrenproc runs the Warren server (cmd/warren) as a child
// process for a test that must kill it the hard way: Build compiles the
// binary, Start runs it on a data directory and
// waits for the addresses it prints, Kill sends SIGKILL (kill -9) and
// reaps it, and Start on the same directory is the restart. t.Cleanup
// kills what is still running. It is for tests only.
package warrenproc

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Timeout bounds how long Start waits for the server to listen and Kill
// waits for it to exit.
const Timeout = 30 * time.Second

// Build compiles cmd/warren into a temporary directory of t and returns
// its path; it fails the test when the build does, and skips it where
// there is no SIGKILL.
func Build(t testing.TB) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "warren")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/warrenmq/broker/cmd/warren").CombinedOutput()
	if err != nil {
		t.Fatalf("warrenproc: go build: %v\n%s", err, out)
	}
	return bin
}

// Process is one running server.
type Process struct {
	// Addr is the AMQP address it listens on; HTTPAddr the management
	// API's, "" without -http.
	Addr, HTTPAddr string

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
}

// Start runs bin on dataDir with an AMQP port the kernel picks and the
// extra flags (with "-http", "127.0.0.1:0" the management API's address
// is HTTPAddr), and returns once it prints the addresses it serves.
func Start(t testing.TB, bin, dataDir string, extra ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-data", dataDir, "-addr", "127.0.0.1:0"}, extra...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("warrenproc: %v", err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("warrenproc: %v", err)
	}
	wantHTTP := false
	for _, a := range extra {
		wantHTTP = wantHTTP || a == "-http"
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	amqpc, httpc := make(chan string, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "management on "); ok {
				httpc <- addr
			}
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				amqpc <- addr
			}
		}
		// Wait only after the pipe is drained (os/exec's rule).
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Kill(t) })
	deadline := time.After(Timeout)
	for p.Addr == "" || (wantHTTP && p.HTTPAddr == "") {
		select {
		case p.Addr = <-amqpc:
		case p.HTTPAddr = <-httpc:
		case <-p.done:
			t.Fatal("warrenproc: server exited before listening")
		case <-deadline:
			t.Fatal("warrenproc: server did not start listening")
		}
	}
	return p
}

// URL is the default vhost over AMQP as guest.
func (p *Process) URL() string { return fmt.Sprintf("amqp://guest:guest@%s/", p.Addr) }

// Pid is the server's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL, as kill -9 does, and waits until the process has
// exited and been reaped; killing an exited process does nothing.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(Timeout):
		t.Error("warrenproc: server did not exit after SIGKILL")
	}
}
