// Package rabbitnode starts a private RabbitMQ node (Debian's
// rabbitmq-server, 3.10.8 on these machines) for a test: its own node
// name, free loopback ports for AMQP, AMQPS, the management API and
// Erlang distribution, and its own data, log, cookie and plugin files in
// a temporary directory, so it never meets the system's node or another
// test's. The management plugin is always enabled (tests read queues
// through its HTTP API); others (shovel, federation, their management
// pages, consistent-hash) are enabled by Options.Plugins before boot.
//
// Kill and Restart let a test take the node down the hard way (SIGKILL)
// and bring it back with the same data on the same ports; t.Cleanup stops
// it and removes its directory.
//
// When rabbitmq-server is not installed the test is skipped with a
// message naming the install script; under CI (CI=true) it fails
// instead, since .ci/run installs it (scripts/install-deps.sh). It is for
// tests only.
package rabbitnode

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/broker/internal/testcert"
)

// binDir is where Debian's rabbitmq-server package keeps the scripts that
// run as the calling user (/usr/sbin's wrappers switch to the rabbitmq
// user and the system node's files).
const binDir = "/usr/lib/rabbitmq/bin"

// User and Password are the node's default account (guest, allowed from
// any address here: loopback_users = none).
const (
	User     = "guest"
	Password = "guest"
)

// Options says what a node runs beyond AMQP and the management API.
type Options struct {
	// Plugins to enable at boot, e.g. "rabbitmq_shovel",
	// "rabbitmq_federation"; rabbitmq_management is always enabled.
	Plugins []string
	// TLS adds an AMQPS listener (TLSPort) with a certificate for
	// 127.0.0.1 issued by Node.CA; clients are not asked for one.
	TLS bool
}

// Node is a running private RabbitMQ node.
type Node struct {
	// Name is the Erlang node name (rabbitnode-<pid>-<n>@localhost).
	Name string
	// Host is 127.0.0.1; AMQPPort serves amqp://, TLSPort amqps:// (0
	// without Options.TLS), MgmtPort the management API over HTTP.
	Host                        string
	AMQPPort, TLSPort, MgmtPort int
	// CA issued the AMQPS certificate (nil without Options.TLS).
	CA *testcert.CA

	dir    string
	env    []string
	cmd    *exec.Cmd
	exited chan struct{}
}

var started atomic.Int64

// Binary reports where rabbitmq-server is, or why it cannot be used.
func Binary() (string, error) {
	p := filepath.Join(binDir, "rabbitmq-server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("rabbitmq-server not installed: run scripts/install-deps.sh (Debian: apt-get install rabbitmq-server)")
	}
	return p, nil
}

// Start boots a node with opts and waits until its AMQP listener and
// management API answer (about 10 s on a 2-core machine).
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI installs it, so this is a failure there)", err)
		}
		t.Skipf("%v", err)
	}
	dir, err := os.MkdirTemp("", "rabbitnode-")
	if err != nil {
		t.Fatalf("rabbitnode: %v", err)
	}
	n := &Node{
		Name: fmt.Sprintf("rabbitnode-%d-%d@localhost", os.Getpid(), started.Add(1)),
		Host: "127.0.0.1",
		dir:  dir,
	}
	t.Cleanup(func() {
		n.stop()
		_ = os.RemoveAll(dir)
	})
	if opts.TLS {
		n.CA = testcert.NewCA(t, "rabbitnode CA")
		leaf := n.CA.Issue(t, "127.0.0.1", true)
		for name, data := range map[string][]byte{"ca.pem": n.CA.PEM, "cert.pem": leaf.CertPEM, "key.pem": leaf.KeyPEM} {
			n.write(t, name, data)
		}
	}
	plugins := append([]string{"rabbitmq_management"}, opts.Plugins...)
	n.write(t, "enabled_plugins", []byte("["+strings.Join(plugins, ",")+"]."))
	n.write(t, "rabbitmq-env.conf", nil)
	var lastErr error
	for range 3 { // ports picked free may be taken before the node binds them
		n.AMQPPort, n.MgmtPort = freePort(t), freePort(t)
		dist := freePort(t)
		if opts.TLS {
			n.TLSPort = freePort(t)
		}
		n.write(t, "rabbitmq.conf", []byte(n.config()))
		n.env = append(os.Environ(),
			"HOME="+dir, // the Erlang cookie lives here, not in the caller's home
			"RABBITMQ_NODENAME="+n.Name,
			"RABBITMQ_NODE_PORT="+strconv.Itoa(n.AMQPPort),
			"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
			"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
			"RABBITMQ_LOGS=-",
			"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
			"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"),
			"RABBITMQ_CONF_ENV_FILE="+filepath.Join(dir, "rabbitmq-env.conf"),
			"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(dir, "advanced.config"),
			"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
		)
		if lastErr = n.run(); lastErr == nil {
			return n
		}
	}
	t.Fatalf("rabbitnode: %v\n%s", lastErr, n.log())
	return nil
}

// URL is the node's default vhost over AMQP as guest.
func (n *Node) URL() string {
	return fmt.Sprintf("amqp://%s:%s@%s/", User, Password, net.JoinHostPort(n.Host, strconv.Itoa(n.AMQPPort)))
}

// TLSURL is URL over AMQPS (Options.TLS).
func (n *Node) TLSURL() string {
	return fmt.Sprintf("amqps://%s:%s@%s/", User, Password, net.JoinHostPort(n.Host, strconv.Itoa(n.TLSPort)))
}

// MgmtURL is the management API's base, e.g. MgmtURL()+"/api/queues";
// it takes basic auth as User/Password.
func (n *Node) MgmtURL() string {
	return "http://" + net.JoinHostPort(n.Host, strconv.Itoa(n.MgmtPort))
}

// Dir is the node's private directory (certificates are ca.pem,
// cert.pem and key.pem there with Options.TLS).
func (n *Node) Dir() string { return n.dir }

// Ctl runs rabbitmqctl against the node and returns its output, failing
// the test when it fails.
func (n *Node) Ctl(t testing.TB, args ...string) string {
	t.Helper()
	return n.tool(t, "rabbitmqctl", args...)
}

// Plugins runs rabbitmq-plugins against the node (e.g. "enable",
// "rabbitmq_shovel": enabled at once on the running node).
func (n *Node) Plugins(t testing.TB, args ...string) string {
	t.Helper()
	return n.tool(t, "rabbitmq-plugins", args...)
}

func (n *Node) tool(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), append([]string{"-n", n.Name}, args...)...)
	cmd.Env = n.env
	cmd.Dir = n.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitnode: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Kill ends the node with SIGKILL, as a crash or kill -9 would: nothing
// is flushed that RabbitMQ had not already written.
func (n *Node) Kill(t testing.TB) {
	t.Helper()
	if n.running() {
		vm := n.vmPid()
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
		waitGone(vm)
		n.waitClosed(t)
	}
}

// waitClosed waits until the AMQP port refuses connections, so that Kill
// returns with the node unreachable, as a crashed machine is.
func (n *Node) waitClosed(t testing.TB) {
	t.Helper()
	addr := net.JoinHostPort(n.Host, strconv.Itoa(n.AMQPPort))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		_ = c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("rabbitnode: %s still accepts connections 10 s after SIGKILL", addr)
}

// vmPid is the Erlang VM's process id from the pid file RabbitMQ writes
// at boot (0 when it has not written one).
func (n *Node) vmPid() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// waitGone waits (up to 10 s) until process pid has exited: the script
// Kill waited for dies first, the VM a moment later, and only then are
// its ports closed.
func waitGone(pid int) {
	if pid <= 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// A zombie (state Z, after the closing parenthesis of its name)
		// has closed everything; whoever adopted it reaps it.
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the node again after Kill (or stops it first), with the
// same data on the same ports, and waits until it answers.
func (n *Node) Restart(t testing.TB) {
	t.Helper()
	n.stop()
	if err := n.run(); err != nil {
		t.Fatalf("rabbitnode: restart: %v\n%s", err, n.log())
	}
}

// run starts the node and waits until it serves; when it does not, it has
// been stopped.
func (n *Node) run() error {
	logf, err := os.OpenFile(filepath.Join(n.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	n.cmd = exec.Command(filepath.Join(binDir, "rabbitmq-server"))
	n.cmd.Env, n.cmd.Dir = n.env, n.dir
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	// Its own process group, so that Kill and stop reach the script and
	// the Erlang VM it starts, and nothing else.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = n.cmd.Start()
	_ = logf.Close()
	if err != nil {
		return fmt.Errorf("start rabbitmq-server: %w", err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(n.cmd, n.exited)
	if err := n.waitReady(90 * time.Second); err != nil {
		n.stop()
		return err
	}
	return nil
}

// waitReady waits until the AMQP port accepts connections and the
// management API answers an authenticated request (the last thing to
// start).
func (n *Node) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			return errors.New("rabbitmq-server exited while starting")
		default:
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(n.Host, strconv.Itoa(n.AMQPPort)), time.Second); err == nil {
			_ = c.Close()
			req, _ := http.NewRequest(http.MethodGet, n.MgmtURL()+"/api/overview", nil)
			req.SetBasicAuth(User, Password)
			if resp, err := client.Do(req); err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not serving after %s", d)
}

func (n *Node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stop ends the node with SIGTERM (RabbitMQ's clean shutdown), SIGKILL
// after 30 s; it does nothing when the node is not running.
func (n *Node) stop() {
	if !n.running() {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
}

func (n *Node) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listeners.tcp.default = %s:%d\n", n.Host, n.AMQPPort)
	fmt.Fprintf(&b, "management.tcp.ip = %s\nmanagement.tcp.port = %d\n", n.Host, n.MgmtPort)
	b.WriteString("loopback_users = none\n")
	if n.TLSPort != 0 {
		fmt.Fprintf(&b, "listeners.ssl.default = %s:%d\n", n.Host, n.TLSPort)
		for _, kv := range [][2]string{{"cacertfile", "ca.pem"}, {"certfile", "cert.pem"}, {"keyfile", "key.pem"}} {
			fmt.Fprintf(&b, "ssl_options.%s = %s\n", kv[0], filepath.Join(n.dir, kv[1]))
		}
		b.WriteString("ssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n")
	}
	return b.String()
}

func (n *Node) write(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(n.dir, name), data, 0o600); err != nil {
		t.Fatalf("rabbitnode: %v", err)
	}
}

// log is the tail of the node's output, for failure messages.
func (n *Node) log() string {
	out, _ := os.ReadFile(filepath.Join(n.dir, "server.log"))
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return string(out)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("rabbitnode: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
