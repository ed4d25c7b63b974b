// Package slapdtest starts a private OpenLDAP server (Debian's slapd) for
// a test: a generated slapd.conf and an mdb database in a temporary
// directory, entries loaded from LDIF with slapadd before it starts,
// listening on free ports of 127.0.0.1 (plain LDAP with StartTLS, and
// LDAPS), stopped and removed by t.Cleanup.
//
// When slapd is not installed the test is skipped with a message naming
// the install script; under CI (CI=true) it fails instead, since .ci/run
// installs slapd (scripts/install-deps.sh). It is for tests only.
package slapdtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/warrenmq/broker/internal/testcert"
)

// The directory every Server serves.
const (
	Suffix   = "dc=example,dc=com"
	RootDN   = "cn=admin," + Suffix
	RootPass = "secret"
)

// Server is a running slapd.
type Server struct {
	// Host is 127.0.0.1; Port serves ldap:// (StartTLS offered) and
	// TLSPort ldaps://.
	Host          string
	Port, TLSPort int
	// CA issued the server's certificate (for 127.0.0.1): trust it to
	// verify the server.
	CA *testcert.CA

	dir, bin, conf string
	cmd            *exec.Cmd
	// exited is closed when slapd has exited.
	exited chan struct{}
}

// Addr is Host:Port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// TLSAddr is Host:TLSPort.
func (s *Server) TLSAddr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.TLSPort)) }

// Binary finds slapd: PATH, then Debian's /usr/sbin (not on a non-root
// PATH).
func Binary() (string, error) {
	if p, err := exec.LookPath("slapd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/slapd"); err == nil {
		return "/usr/sbin/slapd", nil
	}
	return "", fmt.Errorf("slapd not installed: run scripts/install-deps.sh (Debian: apt-get install slapd ldap-utils)")
}

// schemaDir is where Debian's slapd package keeps its schema files.
const schemaDir = "/etc/ldap/schema"

// Start starts a slapd serving Suffix with RootDN/RootPass as its
// administrator and the entries of ldif (the base entry dc=example,dc=com
// is added first; ldif holds the rest). Every entry can be read by
// anyone, as slapd's default access rule says; userPassword values in
// ldif may be cleartext.
func Start(t testing.TB, ldif string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI installs it, so this is a failure there)", err)
		}
		t.Skipf("%v", err)
	}
	slapadd := filepath.Join(filepath.Dir(bin), "slapadd")
	dir, err := os.MkdirTemp("", "slapdtest-")
	if err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	ca := testcert.NewCA(t, "slapdtest CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	for name, data := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": leaf.CertPEM, "key.pem": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatalf("slapdtest: %v", err)
		}
	}
	conf := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(conf, []byte(config(dir)), 0o600); err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	data := filepath.Join(dir, "data.ldif")
	if err := os.WriteFile(data, []byte(baseLDIF+"\n"+ldif), 0o600); err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	if out, err := exec.Command(slapadd, "-f", conf, "-l", data).CombinedOutput(); err != nil {
		t.Fatalf("slapdtest: slapadd: %v: %s", err, out)
	}
	s := &Server{Host: "127.0.0.1", CA: ca, dir: dir}
	s.start(t, bin, conf)
	return s
}

// start runs slapd in the foreground (-d 0) on two free ports, retrying
// with new ports if one was taken in between, and waits until both
// accept connections.
func (s *Server) start(t testing.TB, bin, conf string) {
	t.Helper()
	s.bin, s.conf = bin, conf
	for range 5 {
		s.Port, s.TLSPort = freePort(t), freePort(t)
		if s.run(t) {
			t.Cleanup(s.Stop)
			return
		}
	}
	out, _ := os.ReadFile(filepath.Join(s.dir, "slapd.log"))
	t.Fatalf("slapdtest: slapd did not start: %s", out)
}

// Restart stops slapd and starts it again on the same ports with the
// same database: a directory that went away and came back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if !s.run(t) {
		out, _ := os.ReadFile(filepath.Join(s.dir, "slapd.log"))
		t.Fatalf("slapdtest: slapd did not restart: %s", out)
	}
}

// run starts slapd on s.Port and s.TLSPort and reports whether it is
// ready; when not, it has been stopped.
func (s *Server) run(t testing.TB) bool {
	t.Helper()
	urls := fmt.Sprintf("ldap://%s/ ldaps://%s/", s.Addr(), s.TLSAddr())
	logf, err := os.OpenFile(filepath.Join(s.dir, "slapd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	s.cmd = exec.Command(s.bin, "-f", s.conf, "-h", urls, "-d", "0")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Its own process group, so that nothing the test's terminal sends
	// reaches it and Stop ends exactly this process.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = s.cmd.Start()
	_ = logf.Close() // slapd has its own descriptor
	if err != nil {
		t.Fatalf("slapdtest: start slapd: %v", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(s.cmd, s.exited)
	if s.waitReady(10 * time.Second) {
		return true
	}
	s.Stop()
	return false
}

// waitReady reports whether both ports accept connections within d.
func (s *Server) waitReady(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return false
		default:
		}
		ok := true
		for _, a := range []string{s.Addr(), s.TLSAddr()} {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				ok = false
				break
			}
			_ = c.Close()
		}
		if ok {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Stop ends slapd and waits for it to exit; calling it again does nothing.
// Tests call it to take the server away (a directory that is down).
func (s *Server) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func config(dir string) string {
	return fmt.Sprintf(`include %[2]s/core.schema
include %[2]s/cosine.schema
include %[2]s/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile %[1]s/slapd.pid
TLSCACertificateFile %[1]s/ca.pem
TLSCertificateFile %[1]s/cert.pem
TLSCertificateKeyFile %[1]s/key.pem
database mdb
maxsize 16777216
suffix "%[3]s"
rootdn "%[4]s"
rootpw %[5]s
directory %[1]s/db
`, dir, schemaDir, Suffix, RootDN, RootPass)
}

const baseLDIF = `dn: ` + Suffix + `
objectClass: dcObject
objectClass: organization
o: Example
dc: example
`

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("slapdtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
