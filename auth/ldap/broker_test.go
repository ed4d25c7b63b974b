package ldap_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/ldap"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestBrokerChain: Options.Auth = internal, then LDAP behind an
// auth.Cache. Over TCP and through Broker.Dial, LDAP users log in with
// their directory passwords and the internal user with its stored one;
// wrong, empty and unknown credentials are 403 ACCESS_REFUSED with the
// reason in the log; the management API logs alice in with her
// directory password and her tags from its groups. With slapd stopped, a login the cache has seen still
// works; one it has not is refused (the internal database said no and
// LDAP could not answer).
func TestBrokerChain(t *testing.T) {
	s := server(t)
	lb := newBackend(t, baseConfig(s))
	cache := &auth.Cache{Authn: lb, Authz: lb, TTL: time.Minute}
	var logs amqptest.SyncBuffer
	b := brokertest.NewUnstarted(t, broker.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Auth:   auth.Chain{auth.Internal, cache.Backend(ldap.Name)},
	})
	brokertest.Start(t, b)
	ctx := context.Background()
	// The vhost permissions the broker checks are also stored ones
	// (docs/authentication.md); the users' stored passwords are not their
	// directory passwords, so only LDAP can let them in with those.
	for _, u := range []string{"alice", "bob"} {
		require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: u, Password: "stored-" + u}))
		require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: u, VHost: "/", Configure: ".*", Write: ".*", Read: ".*"}))
	}

	viaDial := amqp091.Config{Dial: func(network, addr string) (net.Conn, error) { return b.Dial(network, addr) }}
	doors := []struct {
		name string
		cfg  amqp091.Config
	}{{"tcp", amqp091.Config{}}, {"dial", viaDial}}
	for _, door := range doors {
		t.Run(door.name, func(t *testing.T) {
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "alice", "alicepw"), door.cfg))
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "guest", "guest"), door.cfg))
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "alice", "stored-alice"), door.cfg))
			for _, bad := range [][2]string{{"alice", "wrong"}, {"alice", ""}, {"nobody", "x"}, {"*", "alicepw"}} {
				_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), bad[0], bad[1]), door.cfg)
				amqptest.RequireCode(t, err, amqp091.AccessRefused, "%q/%q", bad[0], bad[1])
			}
		})
	}
	require.Contains(t, logs.String(), "invalid credentials")
	require.Contains(t, logs.String(), "backend=ldap")

	// The management API's basic auth goes through the chain too, and
	// the tags come from the directory's groups.
	api := amqptest.NewAPI(t, b.ManagementHandler())
	basic := func(user, pw string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
	}
	status, _, body := api.Do("GET", "/api/whoami", "", nil, "Authorization", basic("alice", "alicepw"))
	require.Equal(t, http.StatusOK, status, "%s", body)
	var who struct {
		Name string `json:"name"`
		Tags any    `json:"tags"`
	}
	require.NoError(t, json.Unmarshal(body, &who))
	require.Equal(t, "alice", who.Name)
	require.Contains(t, fmt.Sprint(who.Tags), "administrator")
	status, _, _ = api.Do("GET", "/api/whoami", "", nil, "Authorization", basic("alice", "wrong"))
	require.Equal(t, http.StatusUnauthorized, status)

	s.Stop()
	for _, door := range doors {
		t.Run(door.name+" directory down", func(t *testing.T) {
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "alice", "alicepw"), door.cfg))
			_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), "bob", "bobpw"), door.cfg)
			amqptest.RequireCode(t, err, amqp091.AccessRefused)
		})
	}
	require.Contains(t, logs.String(), "no server reachable")
}

// TestBrokerHungDirectory: a directory that accepts connections and
// never answers, first in the chain. Without Config.Timeout the LDAP
// entry holds the whole chain to Options.LoginTimeout: every login is
// 320 CONNECTION_FORCED (not decided: try again), never 403. With
// Config.Timeout below the login timeout the chain moves on past LDAP in
// time: the internal user logs in, and a user only LDAP knows is refused.
func TestBrokerHungDirectory(t *testing.T) {
	hung := hungServer(t)
	for _, tc := range []struct {
		name         string
		timeout      time.Duration
		alice, guest int
	}{
		{"no ldap timeout", 0, amqp091.ConnectionForced, amqp091.ConnectionForced},
		{"ldap timeout", 100 * time.Millisecond, amqp091.AccessRefused, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := newBackend(t, ldap.Config{Servers: []string{hung}, Timeout: tc.timeout, UserDNPattern: "cn=${username}," + people})
			b := brokertest.NewUnstarted(t, broker.Options{
				LoginTimeout: time.Second,
				Auth:         auth.Chain{lb.Backend(ldap.Name), auth.Internal},
			})
			brokertest.Start(t, b)
			_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "alice", "alicepw"))
			amqptest.RequireCode(t, err, tc.alice)
			url := amqptest.UserURL(b.URL(), "guest", "guest")
			if tc.guest == 0 {
				amqptest.RequireWorks(t, amqptest.Dial(t, url, amqp091.Config{}))
				return
			}
			_, err = amqp091.Dial(url)
			amqptest.RequireCode(t, err, tc.guest)
		})
	}
}
