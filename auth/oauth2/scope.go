package oauth2

import (
	"net/url"
	"strings"

	"github.com/warrenmq/broker/auth"
)

// Match reports whether subject (a vhost, resource name or routing key)
// matches pattern as rabbitmq_auth_backend_oauth2's wildcard:match does
// (RabbitMQ 4.x): '*' stands for any run of bytes, and each part between
// the stars is URL-decoded ("%2F" is "/", "+" is a space) before it is
// compared; a part that does not decode matches nothing. Like RabbitMQ,
// the parts after a star are found leftmost with no backtracking, so
// "*a" does not match "aa", and a pattern ending in two stars needs at
// least one byte for them. Copying that keeps a scope granting in Warren
// exactly what it grants in RabbitMQ, never more.
func Match(subject, pattern string) bool {
	raw := strings.Split(pattern, "*")
	parts := make([]string, len(raw))
	for i, p := range raw {
		d, err := url.QueryUnescape(p)
		if err != nil {
			return false
		}
		parts[i] = d
	}
	if !strings.HasPrefix(subject, parts[0]) {
		return false
	}
	pos, rest := len(parts[0]), parts[1:]
	for {
		switch {
		case len(rest) == 1 && rest[0] == "":
			return true
		case len(rest) == 0:
			return pos == len(subject)
		case pos == len(subject):
			return false
		case rest[0] == "":
			rest = rest[1:]
			continue
		}
		i := strings.Index(subject[pos:], rest[0])
		if i < 0 {
			return false
		}
		pos += i + len(rest[0])
		rest = rest[1:]
	}
}

// Scope is one permission scope with the resource server's prefix
// removed: "read:<vhost>/<name>" or, for topic exchanges,
// "write:<vhost>/<exchange>/<routing key>". Its patterns are Match's.
type Scope struct {
	Permission auth.Permission
	VHost      string
	Name       string
	// RoutingKey is the routing-key pattern; HasRoutingKey says the scope
	// had one (only such scopes grant topic access).
	RoutingKey    string
	HasRoutingKey bool
}

// ParseScope reads a permission scope as RabbitMQ's
// rabbit_oauth2_scope:parse_permission_pattern does: "read:", "write:" or
// "configure:", then two or three '/'-separated patterns. Anything else
// (tag:..., other services' scopes, a wrong count of parts) is not a
// permission scope, and ok is false.
func ParseScope(s string) (sc Scope, ok bool) {
	var rest string
	switch {
	case strings.HasPrefix(s, "read:"):
		sc.Permission, rest = auth.Read, s[len("read:"):]
	case strings.HasPrefix(s, "write:"):
		sc.Permission, rest = auth.Write, s[len("write:"):]
	case strings.HasPrefix(s, "configure:"):
		sc.Permission, rest = auth.Configure, s[len("configure:"):]
	default:
		return Scope{}, false
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 2:
		sc.VHost, sc.Name = parts[0], parts[1]
	case 3:
		sc.VHost, sc.Name, sc.RoutingKey, sc.HasRoutingKey = parts[0], parts[1], parts[2], true
	default:
		return Scope{}, false
	}
	return sc, true
}

// expandScope replaces the variables of scope s as RabbitMQ's
// get_expanded_scopes does: "{vhost}" is the vhost asked about, "{claim}"
// the token's string claim of that name, or the bare name when the token
// has no such string claim. A variable whose name holds '.', '*' or '{',
// or that is not closed, spoils the scope, which then grants nothing
// (expandScope returns ""); so does a value holding '/', which would
// shift the scope's vhost/name/routing-key parts (RabbitMQ 4.3's
// scope_segment_safety).
func expandScope(s string, claims map[string]any, vhost string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		j := strings.IndexByte(s, '}')
		if j < 0 {
			return ""
		}
		name := s[:j]
		if name == "" || strings.ContainsAny(name, ".*{") {
			return ""
		}
		val := name
		if name == "vhost" {
			val = vhost
		} else if v, ok := claims[name].(string); ok {
			val = v
		}
		if strings.Contains(val, "/") {
			return ""
		}
		b.WriteString(val)
		s = s[j+1:]
	}
}

// grants are a token's permission scopes parsed once at login; scopes
// holding variables are kept raw and expanded for each vhost asked about.
type grants struct {
	fixed    []Scope
	variable []string
	claims   map[string]any
}

func newGrants(scopes []string, claims map[string]any) grants {
	var g grants
	for _, s := range scopes {
		if strings.Contains(s, "{") {
			g.variable = append(g.variable, s)
			continue
		}
		if sc, ok := ParseScope(s); ok {
			g.fixed = append(g.fixed, sc)
		}
	}
	if len(g.variable) > 0 {
		g.claims = claims
	}
	return g
}

// any reports whether some scope, expanded for vhost, satisfies ok.
func (g grants) any(vhost string, ok func(Scope) bool) bool {
	for _, sc := range g.fixed {
		if ok(sc) {
			return true
		}
	}
	for _, s := range g.variable {
		if sc, parsed := ParseScope(expandScope(s, g.claims, vhost)); parsed && ok(sc) {
			return true
		}
	}
	return false
}

// vhost is rabbit_oauth2_scope:vhost_access: any permission scope whose
// vhost pattern matches.
func (g grants) vhost(vhost string) bool {
	return g.any(vhost, func(sc Scope) bool { return Match(vhost, sc.VHost) })
}

// resource is rabbit_oauth2_scope:resource_access.
func (g grants) resource(r auth.Resource, p auth.Permission) bool {
	return g.any(r.VHost, func(sc Scope) bool {
		return sc.Permission == p && Match(r.VHost, sc.VHost) && Match(r.Name, sc.Name)
	})
}

// topic is rabbit_oauth2_scope:topic_access: only scopes with a
// routing-key part grant it.
func (g grants) topic(r auth.Resource, p auth.Permission, key string) bool {
	return g.any(r.VHost, func(sc Scope) bool {
		return sc.HasRoutingKey && sc.Permission == p && Match(r.VHost, sc.VHost) &&
			Match(r.Name, sc.Name) && Match(key, sc.RoutingKey)
	})
}
