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
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// tlsCA is a certificate authority made at test time.
type tlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  []byte
}

func newTLSCA(t *testing.T, name string) *tlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tlsCA{cert: cert, key: key, pool: pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for cn (a server one for 127.0.0.1, or
// a client one) and its PEM certificate and key.
func (ca *tlsCA) issue(t *testing.T, cn string, server bool) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// startTLSServer runs the server with args and returns the address of its
// TLS listener (the plain one is off).
func startTLSServer(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, stdoutW, io.Discard)
		stdoutW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	rd := bufio.NewReader(stdoutR)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "tls listening on ")
	require.True(t, ok, "line %q", line)
	go io.Copy(io.Discard, rd)
	return addr
}

// TestTLSFlags serves AMQPS from generated certificates and connects with
// amqp091.DialTLS: PLAIN without a client certificate, EXTERNAL with one
// (logged in as its CN), and a certificate from another CA refused.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := newTLSCA(t, "server CA")
	clients := newTLSCA(t, "clients CA")
	_, certPEM, keyPEM := ca.issue(t, "127.0.0.1", true)
	args := []string{
		"-memory", "-addr", "", "-user", "app", "-password", "pw",
		"-tls-listen", "127.0.0.1:0",
		"-tls-cert", writeFile(t, dir, "server.pem", certPEM),
		"-tls-key", writeFile(t, dir, "server.key", keyPEM),
		"-tls-ca", writeFile(t, dir, "clients.pem", clients.pem),
		"-auth-mechanisms", "PLAIN,AMQPLAIN,EXTERNAL",
	}
	addr := startTLSServer(t, args...)

	works := func(t *testing.T, conn *amqp091.Connection) {
		t.Helper()
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.Close())
		require.NoError(t, conn.Close())
	}
	t.Run("PLAIN without a client certificate", func(t *testing.T) {
		conn, err := amqp091.DialTLS("amqps://app:pw@"+addr+"/", &tls.Config{RootCAs: ca.pool})
		require.NoError(t, err)
		works(t, conn)
		_, err = amqp091.DialTLS("amqps://app:wrong@"+addr+"/", &tls.Config{RootCAs: ca.pool})
		var ae *amqp091.Error
		require.ErrorAs(t, err, &ae)
		require.Equal(t, amqp091.AccessRefused, ae.Code)
	})
	t.Run("EXTERNAL with a client certificate", func(t *testing.T) {
		cert, _, _ := clients.issue(t, "app", false)
		conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{cert}})
		require.NoError(t, err)
		works(t, conn)
	})
	t.Run("a certificate of another CA", func(t *testing.T) {
		cert, _, _ := ca.issue(t, "app", false)
		_, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{cert}})
		require.Error(t, err)
	})
	t.Run("a plain client", func(t *testing.T) {
		_, err := amqp091.DialTLS("amqps://app:pw@"+addr+"/", &tls.Config{})
		require.Error(t, err, "the server certificate is not trusted without the CA")
	})
}

// TestTLSFlagsWithoutClientCA: without -tls-ca no client certificate is
// asked for, and EXTERNAL is not offered unless listed.
func TestTLSFlagsWithoutClientCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTLSCA(t, "server CA")
	_, certPEM, keyPEM := ca.issue(t, "127.0.0.1", true)
	addr := startTLSServer(t, "-memory", "-addr", "", "-user", "app", "-password", "pw", "-tls-listen", "127.0.0.1:0",
		"-tls-cert", writeFile(t, dir, "server.pem", certPEM), "-tls-key", writeFile(t, dir, "server.key", keyPEM))
	conn, err := amqp091.DialTLS("amqps://app:pw@"+addr+"/", &tls.Config{RootCAs: ca.pool})
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	_, err = amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.pool})
	require.Error(t, err, "EXTERNAL is not offered")
}

func TestTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newTLSCA(t, "server CA")
	_, certPEM, keyPEM := ca.issue(t, "127.0.0.1", true)
	cert := writeFile(t, dir, "server.pem", certPEM)
	key := writeFile(t, dir, "server.key", keyPEM)
	notPEM := writeFile(t, dir, "junk.pem", []byte("junk"))
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-tls-listen", "127.0.0.1:0"}, "needs -tls-cert and -tls-key"},
		{[]string{"-tls-cert", cert, "-tls-key", key}, "need -tls-listen"},
		{[]string{"-tls-listen", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", notPEM}, "tls:"},
		{[]string{"-tls-listen", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key, "-tls-ca", notPEM}, "no PEM certificate"},
		{[]string{"-tls-listen", "127.0.0.1:0", "-tls-cert", cert, "-tls-key", key, "-tls-ca", filepath.Join(dir, "missing.pem")}, "tls:"},
		{[]string{"-auth-mechanisms", "PLAIN,ROT13"}, `unknown mechanism "ROT13"`},
		{[]string{"-addr", ""}, "nothing to listen on"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := run(context.Background(), append([]string{"-memory", "-addr", "127.0.0.1:0"}, tc.args...), io.Discard, io.Discard)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
