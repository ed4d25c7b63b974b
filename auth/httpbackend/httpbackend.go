package httpbackend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/warrenmq/broker/auth"
)

// Defaults are RabbitMQ's (rabbitmq_auth_backend_http's application
// environment), except MaxConcurrent, which RabbitMQ does not bound.
const (
	DefaultUserPath       = "http://localhost:8000/auth/user"
	DefaultVHostPath      = "http://localhost:8000/auth/vhost"
	DefaultResourcePath   = "http://localhost:8000/auth/resource"
	DefaultTopicPath      = "http://localhost:8000/auth/topic"
	DefaultRequestTimeout = 15 * time.Second
	DefaultMaxConcurrent  = 64
	// maxBody bounds how much of an answer is read: "allow" and a few tags.
	maxBody = 64 << 10
)

// Config is the backend's settings, named as rabbitmq.conf names them.
// Zero fields take the defaults above.
type Config struct {
	UserPath     string // auth_http.user_path
	VHostPath    string // auth_http.vhost_path
	ResourcePath string // auth_http.resource_path
	TopicPath    string // auth_http.topic_path
	// Method is "GET" or "POST" (auth_http.http_method, any case).
	Method string
	// RequestTimeout bounds each request (auth_http.request_timeout);
	// ConnectionTimeout its connect (auth_http.connection_timeout,
	// RequestTimeout when zero). The caller's context bounds both too.
	RequestTimeout, ConnectionTimeout time.Duration
	// MaxConcurrent is the most requests in flight at once.
	MaxConcurrent int
	// Client, when set, sends the requests (for TLS settings); its Timeout
	// applies on top of RequestTimeout.
	Client *http.Client
}

// Backend asks the HTTP service. Make it with New.
type Backend struct {
	paths          [4]string // by question
	post           bool
	requestTimeout time.Duration
	client         *http.Client
	slots          chan struct{}
}

type question uint8

const (
	userQ question = iota
	vhostQ
	resourceQ
	topicQ
)

var questionNames = [4]string{"user_path", "vhost_path", "resource_path", "topic_path"}

// New checks cfg and returns its Backend: every path must be an absolute
// http or https URL, Method GET or POST.
func New(cfg Config) (*Backend, error) {
	b := &Backend{requestTimeout: cfg.RequestTimeout}
	for i, p := range [4]*string{&cfg.UserPath, &cfg.VHostPath, &cfg.ResourcePath, &cfg.TopicPath} {
		v := *p
		if v == "" {
			v = [4]string{DefaultUserPath, DefaultVHostPath, DefaultResourcePath, DefaultTopicPath}[i]
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("httpbackend: %s %q is not an http or https URL", questionNames[i], v)
		}
		b.paths[i] = v
	}
	switch strings.ToUpper(cfg.Method) {
	case "", http.MethodGet:
	case http.MethodPost:
		b.post = true
	default:
		return nil, fmt.Errorf("httpbackend: http_method %q is neither get nor post", cfg.Method)
	}
	if b.requestTimeout <= 0 {
		b.requestTimeout = DefaultRequestTimeout
	}
	connect := cfg.ConnectionTimeout
	if connect <= 0 {
		connect = b.requestTimeout
	}
	b.client = cfg.Client
	if b.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
		b.client = &http.Client{Transport: tr}
	}
	n := cfg.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	b.slots = make(chan struct{}, n)
	return b, nil
}

// Entry is b as an auth.Chain entry deciding both logins and permissions
// (auth_backends.N = http).
func (b *Backend) Entry(name string) auth.Backend {
	if name == "" {
		name = "http"
	}
	return auth.Backend{Name: name, Authn: b, Authz: b}
}

// ask sends one question and returns the trimmed answer. Errors are the
// service's failures: no slot in time, transport errors, a status other
// than 200 or 201.
func (b *Backend) ask(ctx context.Context, q question, params url.Values) (string, error) {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("httpbackend: %s: every one of %d request slots is busy: %w", questionNames[q], cap(b.slots), ctx.Err())
	}
	defer func() { <-b.slots }()
	ctx, cancel := context.WithTimeout(ctx, b.requestTimeout)
	defer cancel()
	var req *http.Request
	var err error
	body := params.Encode()
	if b.post {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, b.paths[q], strings.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		u := b.paths[q]
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u+sep+body, nil)
	}
	if err != nil {
		return "", fmt.Errorf("httpbackend: %s: %w", questionNames[q], err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		// url.Error's text carries the URL, and with GET the password:
		// keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("httpbackend: %s: %w", questionNames[q], err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fmt.Errorf("httpbackend: %s: reading the answer: %w", questionNames[q], err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("httpbackend: %s answered %s", questionNames[q], resp.Status)
	}
	return strings.Trim(string(data), " "), nil
}

// Authenticate asks user_path with username and password (no password for
// EXTERNAL and direct logins, as RabbitMQ sends none): "allow" with the
// tags that follow it lets the user in.
func (b *Backend) Authenticate(ctx context.Context, req auth.Request) (auth.Identity, error) {
	params := url.Values{"username": {req.User}}
	if req.Secret != "" {
		params.Set("password", req.Secret)
	}
	ans, err := b.ask(ctx, userQ, params)
	if err != nil {
		return auth.Identity{}, err
	}
	tags, err := parseUserAnswer(ans)
	if err != nil {
		return auth.Identity{}, err
	}
	return auth.Identity{User: req.User, Tags: tags}, nil
}

// parseUserAnswer reads user_path's answer: "allow" and the tags after it
// (lower-cased, as RabbitMQ reads the whole answer), a refusal for "deny"
// or "deny <reason>", an error for anything else.
func parseUserAnswer(ans string) ([]string, error) {
	if reason, ok := denied(ans); ok {
		if reason == "" {
			return nil, auth.Refuse("denied by the backing HTTP service")
		}
		return nil, auth.Refuse("denied by the backing HTTP service: %s", reason)
	}
	rest, ok := strings.CutPrefix(strings.ToLower(ans), "allow")
	if !ok || (rest != "" && rest[0] != ' ') {
		return nil, badAnswer(userQ, ans)
	}
	return strings.Fields(rest), nil
}

// denied reports whether ans is "deny" (any case) or "deny <reason>".
func denied(ans string) (reason string, ok bool) {
	if r, ok := strings.CutPrefix(ans, "deny "); ok {
		return strings.TrimSpace(r), true
	}
	return "", strings.EqualFold(ans, "deny")
}

func badAnswer(q question, ans string) error {
	if len(ans) > 64 {
		ans = ans[:64] + "..."
	}
	return fmt.Errorf("httpbackend: %s answered %q, neither allow nor deny", questionNames[q], ans)
}

// decide reads a permission answer: exactly "allow" or "deny [reason]".
func (b *Backend) decide(ctx context.Context, q question, params url.Values) (bool, error) {
	ans, err := b.ask(ctx, q, params)
	if err != nil {
		return false, err
	}
	if _, ok := denied(ans); ok {
		return false, nil
	}
	if strings.EqualFold(ans, "allow") {
		return true, nil
	}
	return false, badAnswer(q, ans)
}

// VHostAccess asks vhost_path with username, vhost, ip (the client's
// address, "" when there is none) and tags.
func (b *Backend) VHostAccess(ctx context.Context, id auth.Identity, vhost string) (bool, error) {
	ip := ""
	if p := auth.PeerFrom(ctx); p != nil {
		ip = p.String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
	}
	return b.decide(ctx, vhostQ, url.Values{
		"username": {id.User}, "vhost": {vhost}, "ip": {ip}, "tags": {strings.Join(id.Tags, " ")},
	})
}

// ResourceAccess asks resource_path with username, vhost, resource
// (exchange or queue), name, permission (configure, write, read) and tags.
func (b *Backend) ResourceAccess(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
	return b.decide(ctx, resourceQ, url.Values{
		"username": {id.User}, "vhost": {r.VHost}, "resource": {r.Kind}, "name": {r.Name},
		"permission": {p.String()}, "tags": {strings.Join(id.Tags, " ")},
	})
}

// TopicAccess asks topic_path with username, vhost, resource (topic), name
// (the exchange), permission (write for a publish, read for a binding),
// tags, routing_key, and RabbitMQ's variable_map.username and
// variable_map.vhost.
func (b *Backend) TopicAccess(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission, key string) (bool, error) {
	return b.decide(ctx, topicQ, url.Values{
		"username": {id.User}, "vhost": {r.VHost}, "resource": {"topic"}, "name": {r.Name},
		"permission": {p.String()}, "tags": {strings.Join(id.Tags, " ")}, "routing_key": {key},
		"variable_map.username": {id.User}, "variable_map.vhost": {r.VHost},
	})
}
