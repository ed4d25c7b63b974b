package mgmt

import (
	"net"
	"time"
)

// Names the external tests (package mgmt_test) need from inside.

// MaxBody is the bound of an object's request body.
const MaxBody = mgmtMaxBody

// GetResult is one message of a get's answer without its payload.
type GetResult = getResult

// IdleConnections is how many of the connections ln (a listener from
// HTTPLimits.Listener) holds count as idle now, among those that never
// logged in and those that did: a test waits for them before it relies
// on one making room, as the server marks a connection idle a moment
// after its client has read the answer.
func IdleConnections(ln net.Listener) (anonymous, loggedIn int) {
	l := ln.(*limitListener)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.mu.conns {
		switch {
		case !c.idle(time.Now()):
		case c.authed.Load():
			loggedIn++
		default:
			anonymous++
		}
	}
	return anonymous, loggedIn
}
