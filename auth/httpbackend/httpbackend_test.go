package httpbackend

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
)

// service is an httptest server answering each path from answers (by the
// path's last element, "user", "vhost", ...), recording what it was sent.
type service struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []url.Values
	methods []string
	answer  func(path string, v url.Values) (int, string)
}

func newService(t *testing.T, answer func(path string, v url.Values) (int, string)) *service {
	s := &service{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		s.mu.Lock()
		s.got = append(s.got, r.Form)
		s.methods = append(s.methods, r.Method)
		s.mu.Unlock()
		code, body := s.answer(r.URL.Path, r.Form)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) config(method string) Config {
	return Config{
		UserPath: s.srv.URL + "/auth/user", VHostPath: s.srv.URL + "/auth/vhost",
		ResourcePath: s.srv.URL + "/auth/resource", TopicPath: s.srv.URL + "/auth/topic",
		Method: method,
	}
}

func (s *service) last() (string, url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[len(s.methods)-1], s.got[len(s.got)-1]
}

// TestAuthenticate: user_path's answers as RabbitMQ reads them, over GET
// and POST, with the parameters RabbitMQ sends.
func TestAuthenticate(t *testing.T) {
	var code int
	var body string
	s := newService(t, func(string, url.Values) (int, string) { return code, body })
	for _, method := range []string{"GET", "post"} {
		b, err := New(s.config(method))
		require.NoError(t, err)
		for _, tc := range []struct {
			name     string
			code     int
			body     string
			tags     []string
			refused  bool
			undecide bool
		}{
			{"allow", 200, "allow", []string{}, false, false},
			{"allow with tags, any case, padded", 200, "  Allow Administrator monitoring ", []string{"administrator", "monitoring"}, false, false},
			{"201 allows too", 201, "allow", []string{}, false, false},
			{"deny", 200, "deny", nil, true, false},
			{"DENY", 200, "DENY", nil, true, false},
			{"deny with a reason", 200, "deny bad password", nil, true, false},
			{"something else", 200, "maybe", nil, false, true},
			{"allowed is not allow", 200, "allowed", nil, false, true},
			{"server error", 500, "allow", nil, false, true},
			{"not found", 404, "deny", nil, false, true},
		} {
			t.Run(method+"/"+tc.name, func(t *testing.T) {
				code, body = tc.code, tc.body
				id, err := b.Authenticate(context.Background(), auth.Request{Mechanism: "PLAIN", User: "alice", Secret: "s3cr&t"})
				m, v := s.last()
				require.Equal(t, map[string]string{"GET": "GET", "post": "POST"}[method], m)
				require.Equal(t, url.Values{"username": {"alice"}, "password": {"s3cr&t"}}, v)
				switch {
				case tc.refused:
					require.ErrorIs(t, err, auth.ErrRefused)
				case tc.undecide:
					require.Error(t, err)
					require.NotErrorIs(t, err, auth.ErrRefused)
					require.NotContains(t, err.Error(), "s3cr&t", "the password stays out of errors")
				default:
					require.NoError(t, err)
					require.Equal(t, "alice", id.User)
					require.ElementsMatch(t, tc.tags, id.Tags)
				}
			})
		}
	}
	b, err := New(s.config("GET"))
	require.NoError(t, err)
	code, body = 200, "allow"
	_, err = b.Authenticate(context.Background(), auth.Request{Mechanism: "EXTERNAL", User: "cn"})
	require.NoError(t, err)
	_, v := s.last()
	require.Equal(t, url.Values{"username": {"cn"}}, v, "no password parameter without a secret")
}

// TestAuthorize: vhost_path, resource_path and topic_path get RabbitMQ's
// parameters; "allow" allows, "deny [reason]" refuses, anything else is
// an error.
func TestAuthorize(t *testing.T) {
	answer := "allow"
	s := newService(t, func(string, url.Values) (int, string) { return 200, answer })
	b, err := New(s.config("POST"))
	require.NoError(t, err)
	id := auth.Identity{User: "alice", Tags: []string{"management", "monitoring"}}
	ctx := auth.WithPeer(context.Background(), &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5000})
	for _, tc := range []struct {
		name string
		ask  func() (bool, error)
		want url.Values
	}{
		{"vhost", func() (bool, error) { return b.VHostAccess(ctx, id, "/") }, url.Values{
			"username": {"alice"}, "vhost": {"/"}, "ip": {"10.1.2.3"}, "tags": {"management monitoring"}}},
		{"resource", func() (bool, error) {
			return b.ResourceAccess(ctx, id, auth.Resource{VHost: "v", Kind: "queue", Name: "q"}, auth.Read)
		}, url.Values{"username": {"alice"}, "vhost": {"v"}, "resource": {"queue"}, "name": {"q"}, "permission": {"read"}, "tags": {"management monitoring"}}},
		{"topic", func() (bool, error) {
			return b.TopicAccess(ctx, id, auth.Resource{VHost: "v", Kind: "topic", Name: "amq.topic"}, auth.Write, "a.b")
		}, url.Values{"username": {"alice"}, "vhost": {"v"}, "resource": {"topic"}, "name": {"amq.topic"}, "permission": {"write"},
			"tags": {"management monitoring"}, "routing_key": {"a.b"}, "variable_map.username": {"alice"}, "variable_map.vhost": {"v"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range []struct {
				body    string
				ok, err bool
			}{{"allow", true, false}, {"ALLOW", true, false}, {"deny", false, false}, {"deny not yours", false, false}, {"allow tag", false, true}, {"", false, true}} {
				answer = a.body
				ok, err := tc.ask()
				require.Equal(t, a.err, err != nil, "answer %q: %v", a.body, err)
				require.Equal(t, a.ok, ok, "answer %q", a.body)
				_, v := s.last()
				require.Equal(t, tc.want, v)
			}
		})
	}
	answer = "deny"
	ok, err := b.VHostAccess(context.Background(), id, "/")
	require.NoError(t, err)
	require.False(t, ok)
	_, v := s.last()
	require.Equal(t, []string{""}, v["ip"], "no peer: an empty ip")
}

// TestHangingService: a service that never answers is an error (not a
// refusal) when the caller's context ends; while it holds every request
// slot, other questions fail at their own deadline instead of queueing
// behind it; once it lets go, they are answered again.
func TestHangingService(t *testing.T) {
	release := make(chan struct{})
	hung := make(chan struct{}, 4)
	s := newService(t, func(path string, v url.Values) (int, string) {
		if v.Get("username") == "slow" {
			hung <- struct{}{}
			<-release
		}
		return 200, "allow"
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := s.config("GET")
	cfg.MaxConcurrent = 1
	b, err := New(cfg)
	require.NoError(t, err)

	errs := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := b.Authenticate(ctx, auth.Request{User: "slow", Secret: "x"})
		errs <- err
	}()
	<-hung
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = b.Authenticate(ctx, auth.Request{User: "fast", Secret: "x"})
	cancel()
	require.ErrorContains(t, err, "request slots is busy")
	require.NotErrorIs(t, err, auth.ErrRefused)

	err = <-errs
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, auth.ErrRefused)
	close(release)
	_, err = b.Authenticate(context.Background(), auth.Request{User: "fast", Secret: "x"})
	require.NoError(t, err, "the slot is free again")
}

// TestNew refuses settings RabbitMQ's schema would and fills RabbitMQ's
// defaults.
func TestNew(t *testing.T) {
	for _, cfg := range []Config{
		{UserPath: "localhost:8000/auth/user"},
		{VHostPath: "ftp://h/x"},
		{ResourcePath: "http://"},
		{Method: "PUT"},
	} {
		_, err := New(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	b, err := New(Config{})
	require.NoError(t, err)
	require.Equal(t, [4]string{DefaultUserPath, DefaultVHostPath, DefaultResourcePath, DefaultTopicPath}, b.paths)
	require.False(t, b.post)
	require.Equal(t, DefaultRequestTimeout, b.requestTimeout)
	require.Equal(t, DefaultMaxConcurrent, cap(b.slots))
}

// FuzzUserAnswer: any answer is exactly one of allow (with tags that are
// single lower-case words), a refusal, or an error that is not a refusal.
func FuzzUserAnswer(f *testing.F) {
	for _, s := range []string{"allow", "allow a b", "deny", "deny why", "DENY x", "allowed", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ans string) {
		tags, err := parseUserAnswer(ans)
		if err != nil {
			require.Nil(t, tags)
			return
		}
		for _, tag := range tags {
			require.NotEmpty(t, tag)
			require.NotContains(t, tag, " ")
		}
	})
}
