package session

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/vhost"
)

// RabbitMQ's defaults (4.x), used for zero Config fields. These are the
// only definitions: the broker package exports the first three as
// broker.DefaultChannelMax, DefaultFrameMax and DefaultHeartbeat, since
// this package, which applies them, cannot import it.
const (
	DefaultChannelMax       = 2047
	DefaultFrameMax         = 131072
	DefaultHeartbeat        = 60 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second // RabbitMQ's handshake_timeout
	DefaultCloseTimeout     = 2 * time.Second
)

// maxBodySize is the sanity limit on a content header's body-size: RabbitMQ's
// hard ?MAX_MSG_SIZE (512 MiB), above which it answers 501 FRAME_ERROR before
// reading any body. The configurable, lower limit (max_message_size, 406
// PRECONDITION_FAILED) belongs to the publish path; see
// (*Channel).checkBodySize.
const maxBodySize = 512 << 20

// Config is what a connection needs from the broker. One Config is shared by
// every connection, so its funcs must be safe for concurrent use; a Conn never
// modifies it. Zero fields take the defaults above.
type Config struct {
	// Clock, when set, dates each publish with the time its bytes were
	// read (transport.Clocked), so a queue counts a message's age from
	// then: the broker's clock (Options.Clock).
	Clock clock.Clock
	// Authenticate reports whether user may log in with password. nil refuses
	// everyone.
	Authenticate func(user, password string) bool
	// Login, when set, replaces Authenticate: it decides a login knowing
	// the peer's address and TLS state, and returns a reason for a refusal
	// that goes into the 403 text ("" for RabbitMQ's generic text that does
	// not say whether the user exists). A non-nil err means it could not
	// decide (the user store did not answer): the connection is closed
	// with err (an *amqp.Error, else 541) instead of 403, so clients do
	// not take a passing failure for bad credentials. See auth.go.
	Login func(*LoginAttempt) (ok bool, reason string, err error)
	// UpdateSecret, when set, checks connection.update-secret's new
	// secret on a connection whose credential expires (Login set
	// LoginAttempt.Expires): ok false refuses it (530 NOT_ALLOWED), a
	// non-nil err closes the connection with err (an *amqp.Error, else
	// 541); when accepted, expires is the new credential's expiry and z
	// what decides the connection's permissions from now on (as
	// LoginAttempt.Authz: nil when the user database decides). On other
	// connections update-secret is answered unchecked (expiry.go). peer
	// is the client's address, as in LoginAttempt.
	UpdateSecret func(user, secret string, peer net.Addr) (ok bool, z *Authz, expires time.Time, err error)
	// External offers the EXTERNAL mechanism to TLS clients that presented
	// a certificate; the user is the certificate's subject CN.
	External bool
	// Open admits connection.open of user to vhost (after the vhost was
	// found): the user's Access there (nil: unrestricted) and a release
	// func the connection calls once when it ends, or the error to close
	// the connection with (530 for refused vhosts and connection limits).
	// nil admits everyone with no permission checks. z is the login's
	// LoginAttempt.Authz: nil when the user database decides.
	Open func(user, vhost string, z *Authz) (access *Access, release func(), err error)
	// Impersonator reports whether user has RabbitMQ's impersonator tag,
	// which lets its publishes carry another user's user_id property. It
	// is asked only for such a publish on a connection with permission
	// checks; nil lets nobody impersonate.
	Impersonator func(user string) bool
	// VHostExists reports whether connection.open may name vhost. nil accepts
	// only "/". It is consulted only when VHost is nil.
	VHostExists func(vhost string) bool
	// VHost returns the topology of a vhost for connection.open; nil or
	// false refuses the vhost with 530. When VHost is nil, channels of the
	// connection answer the exchange, queue, basic, tx and confirm classes
	// with 540 (the connection-only mode the session tests use).
	VHost func(name string) (*vhost.VHost, bool)
	// MaxMessageSize is the largest message body accepted; a larger one
	// closes the channel with 406 PRECONDITION_FAILED, as RabbitMQ's
	// max_message_size does. Zero means no limit below maxBodySize.
	MaxMessageSize int

	// Logger receives connection events; nil discards them.
	Logger *slog.Logger

	// ChannelMax is the highest channel number the server allows (sent in
	// connection.tune). Zero means DefaultChannelMax.
	ChannelMax uint16
	// FrameMax is the largest frame the server accepts, header and end octet
	// included. Zero means DefaultFrameMax; values below amqp.FrameMinSize are
	// raised to it.
	FrameMax uint32
	// Heartbeat is the interval proposed in connection.tune, in whole seconds.
	// Zero means DefaultHeartbeat; negative proposes none.
	Heartbeat time.Duration

	// HandshakeTimeout bounds the time from accept to connection.open-ok.
	HandshakeTimeout time.Duration
	// CloseTimeout bounds how long a connection waits for close-ok after
	// sending connection.close, and for its last frames to be written.
	CloseTimeout time.Duration

	// Product and Version go into the server-properties of connection.start.
	// "" means "Warren" and "dev".
	Product, Version string

	// Counters, when set, counts connection and publish events of every
	// connection (inspect.go).
	Counters *Counters

	// Alarms, when set, blocks publishing connections while a resource
	// alarm is raised (see Alarms). nil never blocks.
	Alarms *Alarms

	// Drain, when set and started, refuses publishes and stops new
	// deliveries for a graceful shutdown (drain.go). nil never drains.
	Drain *Drain

	// Events, when set, receives connection, consumer and return events
	// (events.go). nil reports nothing.
	Events *events.Hub

	// Profile is the RabbitMQ release whose answers differ by version
	// (internal/compat): the smallest frame-max in tune-ok, global QoS,
	// direct reply-to with mandatory, passive declares' permission. The
	// zero Profile is the default one.
	Profile compat.Profile
}

// Alarm bits of Alarms: the resources RabbitMQ raises alarms for.
const (
	AlarmMemory uint32 = 1 << iota // message bytes in memory above the watermark
	AlarmDisk                      // free disk space below the limit
)

// Alarms is the set of raised resource alarms that connections obey, as
// RabbitMQ's rabbit_alarm: while any is raised, a connection that reads a
// basic.publish sends connection.blocked (when the client announced the
// connection.blocked capability), stops reading its socket with that frame
// held and its heartbeat monitor paused, and once every alarm cleared sends
// connection.unblocked and handles the frame. Connections that only consume
// are never blocked, so consumers drain the queues. A direct connection's
// publish waits in Handle instead. The zero value has no alarm raised.
//
// Set is for the one owner of the alarm state (the broker's monitor); every
// other method is safe from any goroutine. A reader pays one atomic load
// per method frame while no alarm is raised.
type Alarms struct {
	active atomic.Uint32 // bit set of raised alarms
	// buffered is the message bytes connections hold before a queue has
	// them (see Buffered).
	buffered atomic.Int64
	mu       sync.Mutex
	change   chan struct{} // closed and replaced when active changes; nil until watched
}

// Buffered returns the message bytes the connections sharing a hold in
// memory before any queue has them: bodies still arriving (a content whose
// body frames are not all in) and the publishes of uncommitted
// transactions. The broker's memory alarm counts them with the bytes its
// queues hold, as RabbitMQ's watermark counts all of the VM's memory. Safe
// from any goroutine.
func (a *Alarms) Buffered() int64 { return a.buffered.Load() }

// addBuffered adds n (negative: releases) to Buffered; a nil *Alarms
// counts nothing.
func (a *Alarms) addBuffered(n int64) {
	if a != nil && n != 0 {
		a.buffered.Add(n)
	}
}

// Set replaces the raised alarms with active (a bit set of AlarmMemory and
// AlarmDisk) and wakes every connection held by the old set.
func (a *Alarms) Set(active uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active.Swap(active) == active {
		return
	}
	if a.change != nil {
		close(a.change)
		a.change = nil
	}
}

// Active returns the raised alarms.
func (a *Alarms) Active() uint32 { return a.active.Load() }

// watch returns the raised alarms and a channel closed at the next change.
func (a *Alarms) watch() (uint32, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.change == nil {
		a.change = make(chan struct{})
	}
	return a.active.Load(), a.change
}

// BlockedReason is the reason connection.blocked gives for the alarms in
// active, worded as RabbitMQ's rabbit_reader does: "low on memory", "low on
// disk", "low on memory & disk".
func BlockedReason(active uint32) string {
	var on []string
	if active&AlarmMemory != 0 {
		on = append(on, "memory")
	}
	if active&AlarmDisk != 0 {
		on = append(on, "disk")
	}
	return "low on " + strings.Join(on, " & ")
}

// settings are a Config with defaults applied, copied into each Conn.
type settings struct {
	channelMax       uint16
	frameMax         uint32
	heartbeatSeconds uint16
	handshakeTimeout time.Duration
	closeTimeout     time.Duration
	product, version string
	// frameMinSize is the profile's: the smallest frame-max tune-ok may
	// choose (4096; 8192 from RabbitMQ 4.1).
	frameMinSize uint32
	profile      compat.Profile
}

func (c *Config) settings() settings {
	s := settings{
		channelMax:       c.ChannelMax,
		frameMax:         c.FrameMax,
		handshakeTimeout: c.HandshakeTimeout,
		closeTimeout:     c.CloseTimeout,
		product:          c.Product,
		version:          c.Version,
		profile:          c.Profile.OrDefault(),
	}
	s.frameMinSize = max(s.profile.FrameMinSize, amqp.FrameMinSize)
	if s.channelMax == 0 {
		s.channelMax = DefaultChannelMax
	}
	if s.frameMax == 0 {
		s.frameMax = DefaultFrameMax
	}
	s.frameMax = max(s.frameMax, s.frameMinSize)
	switch hb := c.Heartbeat; {
	case hb == 0:
		s.heartbeatSeconds = uint16(DefaultHeartbeat / time.Second)
	case hb < 0:
		s.heartbeatSeconds = 0
	default:
		// Round up so a sub-second value still proposes a heartbeat.
		s.heartbeatSeconds = uint16(min((hb+time.Second-1)/time.Second, 65535))
	}
	if s.handshakeTimeout <= 0 {
		s.handshakeTimeout = DefaultHandshakeTimeout
	}
	if s.closeTimeout <= 0 {
		s.closeTimeout = DefaultCloseTimeout
	}
	if s.product == "" {
		s.product = "Warren"
	}
	if s.version == "" {
		s.version = "dev"
	}
	return s
}

// capabilities is the one place that says which RabbitMQ extensions the
// server implements; connection.start advertises exactly the entries set to
// true (clients such as amqp091-go only look for true). Flip an entry when
// its feature lands.
var capabilities = []struct {
	name        string
	implemented bool
}{
	// A failed login is answered with connection.close 403 instead of a
	// silently closed socket.
	{"authentication_failure_close", true},
	{"basic.nack", true},
	{"connection.blocked", true},
	{"consumer_cancel_notify", true},
	{"consumer_priorities", true}, // x-priority on basic.consume (internal/queue)
	{"direct_reply_to", true},
	{"exchange_exchange_bindings", true},
	{"per_consumer_qos", true},
	{"publisher_confirms", true},
}

// startFrames caches the encoded connection.start frames by what they
// depend on (startFrame): the same few for every connection of a process.
var startFrames sync.Map // startKey → []byte

type startKey struct{ product, version, mechanisms string }

// startFrame returns connection.start on channel 0 as a frame, encoded
// once per product, version and mechanisms offered: encoding its nested
// tables (server properties, capabilities) for every connection cost the
// accept path a map per table and grew each reader's stack to 8 KiB,
// which it kept until the next collection.
func startFrame(s *settings, mechanisms string) []byte {
	k := startKey{s.product, s.version, mechanisms}
	if f, ok := startFrames.Load(k); ok {
		return f.([]byte)
	}
	f := amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionStart{
		VersionMajor:     0,
		VersionMinor:     9,
		ServerProperties: serverProperties(s),
		Mechanisms:       mechanisms,
		Locales:          "en_US",
	})
	cached, _ := startFrames.LoadOrStore(k, f)
	return cached.([]byte)
}

// serverProperties builds the server-properties table of connection.start.
func serverProperties(s *settings) amqp.Table {
	caps := amqp.Table{}
	for _, c := range capabilities {
		if c.implemented {
			caps[c.name] = true
		}
	}
	return amqp.Table{
		"product":      s.product,
		"version":      s.version,
		"platform":     "Go",
		"copyright":    "The Warren authors",
		"information":  "https://github.com/warrenmq/broker",
		"capabilities": caps,
	}
}
