package broker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/testcert"
)

// startTLSBroker serves AMQPS on 127.0.0.1:0 with a server certificate from
// ca, accepting client certificates from clientCA when given.
func startTLSBroker(t *testing.T, ca *testcert.CA, opts broker.Options) (*broker.Broker, string) {
	t.Helper()
	opts.TLSConfig = &tls.Config{
		Certificates: []tls.Certificate{ca.Issue(t, "127.0.0.1", true).TLS},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool,
		MinVersion:   tls.VersionTLS12,
	}
	b, err := broker.New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	addr, err := b.ListenTLS("127.0.0.1:0")
	require.NoError(t, err)
	return b, fmt.Sprintf("amqps://%s/", addr)
}

func TestTLS(t *testing.T) {
	ca := testcert.NewCA(t, "warren test CA")
	other := testcert.NewCA(t, "warren test CA")
	alice := ca.Issue(t, "alice", false).TLS
	mallory := ca.Issue(t, "mallory", false).TLS
	forged := other.Issue(t, "alice", false).TLS

	for _, tc := range []struct {
		name      string
		mechs     []string
		cert      *tls.Certificate
		external  bool // DialTLS_ExternalAuth instead of PLAIN guest
		wantErr   error
		wantCode  int
		wantText  string
		handshake bool // the TLS handshake itself must fail
	}{
		{name: "no client certificate, PLAIN"},
		{name: "client certificate, PLAIN", cert: &alice, mechs: []string{"EXTERNAL"}},
		{name: "EXTERNAL", cert: &alice, mechs: []string{"EXTERNAL"}, external: true},
		{name: "EXTERNAL without a certificate is not offered", mechs: []string{"EXTERNAL"}, external: true, wantErr: amqp091.ErrSASL},
		{name: "EXTERNAL not configured", cert: &alice, external: true, wantErr: amqp091.ErrSASL},
		{name: "EXTERNAL for an unknown user", cert: &mallory, mechs: []string{"EXTERNAL"}, external: true,
			wantCode: amqp091.AccessRefused, wantText: "EXTERNAL login refused: user 'mallory' - no such user"},
		{name: "certificate from another CA", cert: &forged, mechs: []string{"EXTERNAL"}, external: true, handshake: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			b, url := startTLSBroker(t, ca, broker.Options{AuthMechanisms: tc.mechs})
			ctx := context.Background()
			require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "alice", Password: "unused-password"}))
			require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("alice", "/")))

			cfg := &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			var conn *amqp091.Connection
			var err error
			if tc.external {
				conn, err = amqp091.DialTLS_ExternalAuth(url, cfg)
			} else {
				conn, err = amqp091.DialTLS("amqps://guest:guest@"+url[len("amqps://"):], cfg)
			}
			switch {
			case tc.handshake:
				// The server refuses the certificate in the handshake,
				// before any AMQP: no SASL and no connection.close.
				require.Error(t, err)
				require.NotErrorIs(t, err, amqp091.ErrSASL)
				var ae *amqp091.Error
				require.False(t, errors.As(err, &ae) && ae.Code == amqp091.AccessRefused, "got %v", err)
				return
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
				return
			case tc.wantCode != 0:
				amqptest.RequireReply(t, err, tc.wantCode, tc.wantText)
				return
			}
			require.NoError(t, err)
			defer conn.Close()
			ch, err := conn.Channel()
			require.NoError(t, err)
			q, err := ch.QueueDeclare("", false, true, true, false, nil)
			require.NoError(t, err)
			require.NoError(t, ch.PublishWithContext(ctx, "", q.Name, false, false, amqp091.Publishing{Body: []byte("over tls")}))
			d := amqptest.Get(t, ch, q.Name, true)
			require.Equal(t, "over tls", string(d.Body))
			require.NoError(t, conn.Close())
		})
	}
}
