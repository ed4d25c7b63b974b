package server

import (
	"context"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/testcert"
)

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
	return startServer(t, []string{"tls listening on "}, args...)[0]
}

// TestTLSFlags serves AMQPS from generated certificates and connects with
// amqp091.DialTLS: PLAIN without a client certificate, EXTERNAL with one
// (logged in as its CN), and a certificate from another CA refused.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "server CA")
	clients := testcert.NewCA(t, "clients CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	certPEM, keyPEM := leaf.CertPEM, leaf.KeyPEM
	args := []string{
		"-memory", "-addr", "", "-user", "app", "-password", "pw",
		"-tls-listen", "127.0.0.1:0",
		"-tls-cert", writeFile(t, dir, "server.pem", certPEM),
		"-tls-key", writeFile(t, dir, "server.key", keyPEM),
		"-tls-ca", writeFile(t, dir, "clients.pem", clients.PEM),
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
		conn, err := amqp091.DialTLS("amqps://app:pw@"+addr+"/", &tls.Config{RootCAs: ca.Pool})
		require.NoError(t, err)
		works(t, conn)
		_, err = amqp091.DialTLS("amqps://app:wrong@"+addr+"/", &tls.Config{RootCAs: ca.Pool})
		var ae *amqp091.Error
		require.ErrorAs(t, err, &ae)
		require.Equal(t, amqp091.AccessRefused, ae.Code)
	})
	t.Run("EXTERNAL with a client certificate", func(t *testing.T) {
		cert := clients.Issue(t, "app", false).TLS
		conn, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert}})
		require.NoError(t, err)
		works(t, conn)
	})
	t.Run("a certificate of another CA", func(t *testing.T) {
		cert := ca.Issue(t, "app", false).TLS
		_, err := amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert}})
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
	ca := testcert.NewCA(t, "server CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	certPEM, keyPEM := leaf.CertPEM, leaf.KeyPEM
	addr := startTLSServer(t, "-memory", "-addr", "", "-user", "app", "-password", "pw", "-tls-listen", "127.0.0.1:0",
		"-tls-cert", writeFile(t, dir, "server.pem", certPEM), "-tls-key", writeFile(t, dir, "server.key", keyPEM))
	conn, err := amqp091.DialTLS("amqps://app:pw@"+addr+"/", &tls.Config{RootCAs: ca.Pool})
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	_, err = amqp091.DialTLS_ExternalAuth("amqps://"+addr+"/", &tls.Config{RootCAs: ca.Pool})
	require.Error(t, err, "EXTERNAL is not offered")
}

func TestTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "server CA")
	leaf := ca.Issue(t, "127.0.0.1", true)
	certPEM, keyPEM := leaf.CertPEM, leaf.KeyPEM
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
