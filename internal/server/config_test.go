package server

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// TestConfigFile: a rabbitmq.conf of the kind RabbitMQ's docs show starts
// the server with its listener, default user (no guest), limits and
// management port; a flag on the command line wins over the file.
func TestConfigFile(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "rabbitmq.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`# rabbitmq.conf
listeners.tcp.default = 127.0.0.1:0
default_user = admin
default_pass = s3cret
vm_memory_high_watermark.absolute = 2GB
disk_free_limit.absolute = 1MB
consumer_timeout = 60000
loopback_users.guest = true
management.tcp.ip = 127.0.0.1
management.tcp.port = 0
`), 0o600))
	addrs := startServer(t, []string{"listening on ", "management on "}, "-memory", "-config", conf)
	conn, err := amqp091.Dial("amqp://admin:s3cret@" + addrs[0] + "/")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	_, err = amqp091.Dial("amqp://guest:guest@" + addrs[0] + "/")
	require.Error(t, err, "guest is not created when default_user is set")
	resp, err := http.Get("http://" + addrs[1] + "/api/overview")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ conf, err string }{
		{"heartbeat_x = 1\n\nauth_backends.1 = ldap\n", "line 1: unknown key heartbeat_x"},
		{"# ok\nauth_backends.1 = kerberos\n", "line 2: auth_backends.1: auth backend \"kerberos\" is not available"},
		{"consumer_timeout = soon\n", "line 1: consumer_timeout:"},
		{"disk_free_limit.absolute = 0.4\n", "line 1: disk_free_limit.absolute:"},
		{"listeners.tcp.default = nowhere\n", "is neither a port nor host:port"},
		{"default_user\n", "line 1:"},
	} {
		conf := filepath.Join(dir, "rabbitmq.conf")
		require.NoError(t, os.WriteFile(conf, []byte(tc.conf), 0o600))
		err := run(context.Background(), []string{"-memory", "-config", conf}, io.Discard, io.Discard)
		require.ErrorContains(t, err, tc.err, tc.conf)
	}
	err := run(context.Background(), []string{"-config", filepath.Join(dir, "missing.conf")}, io.Discard, io.Discard)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestVersionFlag(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), []string{"-version"}, &out, io.Discard))
	require.Contains(t, out.String(), "warren "+broker.Version+"\n")
	require.Contains(t, out.String(), "\ngo go1.")
}
