package mgmt

import (
	"context"
	"net/http"

	"github.com/warrenmq/broker/auth"
)

// The management API's authorization, copied from RabbitMQ 4.x's
// rabbit_mgmt_util and its direct-connection requests:
//
//   - Who gets in: a user tagged administrator, monitoring, management or
//     policymaker; users, permissions, definitions and operator policies
//     need administrator; policies need policymaker or administrator
//     (is_authorized_policies), and a policymaker sees the policies of
//     the vhosts it has permissions on only.
//   - Which vhosts a user sees (list_visible_vhosts): administrator and
//     monitoring every vhost; the others only those they have permissions
//     on. A path naming a vhost the user cannot see is 401 "User not
//     authorised to access virtual host"; listings leave such vhosts out.
//   - Writes to objects are AMQP operations on the user's behalf (RabbitMQ
//     runs them on a direct connection as that user), so they need the
//     same permissions as over AMQP, whatever the user's tags: declare and
//     delete need configure on the exchange or queue, purge and get need
//     read on the queue, binding and unbinding need write on the
//     destination and read on the source. No permissions on the vhost at
//     all is 401 "Access refused."; a refused permission is 401 with
//     AMQP's reply text. Another connection's exclusive queue cannot be
//     deleted, purged or bound (405 RESOURCE_LOCKED, answered 400).
//   - Connections: administrator and monitoring see all of them, the
//     others their own; only administrator closes another user's
//     connection (is_authorized_user: DELETE needs is_admin), so
//     monitoring's wider view is read-only.

// mgmtPerm is one of RabbitMQ's permission kinds.
type mgmtPerm uint8

const (
	mgmtConfigure mgmtPerm = iota
	mgmtWrite
	mgmtRead
)

// grantOf returns the user's permissions on the vhost named vh, nil when
// the user has none there; the answer is kept for the rest of the call.
func (m *mgmt) grantOf(c *mgmtCall, vh string) (*Grant, error) {
	if g, ok := c.grants[vh]; ok {
		return g, nil
	}
	g, err := m.b.Grant(c.r.Context(), c.user.Name, vh)
	if err != nil {
		return nil, err
	}
	if c.grants == nil {
		c.grants = make(map[string]*Grant, 1)
	}
	c.grants[vh] = g
	return g, nil
}

// visible reports whether the user may see the objects of the vhost named
// vh: administrator and monitoring see every vhost, the others those they
// have permissions on.
func (m *mgmt) visible(c *mgmtCall, vh string) bool {
	if c.all {
		return true
	}
	if c.user.Authz != nil {
		ok, err := m.vhostAccess(c, vh)
		return err == nil && ok
	}
	g, err := m.grantOf(c, vh)
	return err == nil && g != nil
}

// identity is the user as auth.Authorizer knows it.
func (c *mgmtCall) identity() auth.Identity {
	return auth.Identity{User: c.user.Name, Tags: c.user.Tags}
}

// authzContext is the request's context with the client's address for
// the Authorizer (auth.WithPeer).
func (c *mgmtCall) authzContext() context.Context {
	return auth.WithPeer(c.r.Context(), remoteAddr(c.r))
}

// vhostAccess asks user.Authz whether the user may use vh; an allowed
// answer is kept for the rest of the call.
func (m *mgmt) vhostAccess(c *mgmtCall, vh string) (bool, error) {
	if ok, seen := c.vhostOK[vh]; seen {
		return ok, nil
	}
	ok, err := c.user.Authz.VHostAccess(c.authzContext(), c.identity(), vh)
	if err != nil {
		return false, err
	}
	if c.vhostOK == nil {
		c.vhostOK = make(map[string]bool, 1)
	}
	c.vhostOK[vh] = ok
	return ok, nil
}

// notDecided answers 503 for a permission an Authorizer could not decide:
// "try again", not 401, as an undecided login.
func notDecided(c *mgmtCall, err error) {
	WriteError(c.w, http.StatusServiceUnavailable, "service_unavailable", "cannot check permissions now: the authorisation backend did not decide ("+err.Error()+"); try again")
}

// permitAuthz is permit for a user whose Authz decides.
func (m *mgmt) permitAuthz(c *mgmtCall, vh string, checks []mgmtCheck) bool {
	ok, err := m.vhostAccess(c, vh)
	if err != nil {
		notDecided(c, err)
		return false
	}
	if !ok {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "Access refused.")
		return false
	}
	for _, ck := range checks {
		name := ck.name
		if ck.resource == "exchange" && name == "" {
			name = "amq.default"
		}
		p := auth.Configure
		switch ck.kind {
		case mgmtWrite:
			p = auth.Write
		case mgmtRead:
			p = auth.Read
		}
		ok, err := c.user.Authz.ResourceAccess(c.authzContext(), c.identity(), auth.Resource{VHost: vh, Kind: ck.resource, Name: name}, p)
		if err != nil {
			notDecided(c, err)
			return false
		}
		if !ok {
			WriteError(c.w, http.StatusUnauthorized, "not_authorised",
				"access to "+ck.resource+" '"+name+"' in vhost '"+vh+"' refused for user '"+c.user.Name+"'")
			return false
		}
	}
	return true
}

// visibleVHosts lists the vhosts the user may see.
func (m *mgmt) visibleVHosts(c *mgmtCall) []string {
	var out []string
	for _, vh := range m.b.VHosts() {
		if m.visible(c, vh) {
			out = append(out, vh)
		}
	}
	return out
}

// mgmtCheck is one permission an operation needs: kind on the exchange or
// queue (resource) called name.
type mgmtCheck struct {
	kind     mgmtPerm
	resource string
	name     string
}

// permit reports whether the user holds every permission checks names on
// vh, as AMQP checks them for the same operation; otherwise it answers 401
// and returns false.
func (m *mgmt) permit(c *mgmtCall, vh string, checks ...mgmtCheck) bool {
	if c.user.Authz != nil {
		return m.permitAuthz(c, vh, checks)
	}
	g, err := m.grantOf(c, vh)
	if err != nil {
		writeAMQPError(c.w, err)
		return false
	}
	if g == nil {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "Access refused.")
		return false
	}
	for _, ck := range checks {
		re := g.Configure
		switch ck.kind {
		case mgmtWrite:
			re = g.Write
		case mgmtRead:
			re = g.Read
		}
		name := ck.name
		if ck.resource == "exchange" && name == "" {
			name = "amq.default" // as rabbit_access_control checks it
		}
		if re == nil || !re.MatchString(name) {
			WriteError(c.w, http.StatusUnauthorized, "not_authorised",
				"access to "+ck.resource+" '"+name+"' in vhost '"+vh+"' refused for user '"+c.user.Name+"'")
			return false
		}
	}
	return true
}
