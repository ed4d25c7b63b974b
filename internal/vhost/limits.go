package vhost

import (
	"unicode/utf8"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/routing"
)

// MaxNameLen is the longest exchange name, queue name or binding key, in
// bytes: what an AMQP short string carries (spec §4.2.5.3).
const MaxNameLen = 255

// DefaultMaxArgumentsSize bounds an encoded argument table when
// Config.MaxArgumentsSize is 0: what a queue.declare in one frame of
// RabbitMQ's default frame_max (131072) could carry besides its other
// fields (frame header and end, class and method ids, reserved short, the
// longest name and the flags).
const DefaultMaxArgumentsSize = 131072 - 8 - 4 - 2 - (1 + MaxNameLen) - 1

// ArgumentsSizeFor is the bound on an encoded argument table that a
// queue.declare in one frame of frameMax bytes could carry, for
// Config.MaxArgumentsSize (a frameMax below the spec's minimum counts as
// that minimum).
func ArgumentsSizeFor(frameMax uint32) int {
	return int(max(frameMax, amqp.FrameMinSize)) - 8 - 4 - 2 - (1 + MaxNameLen) - 1
}

// checkName applies the limits every door shares to the name of an entity
// being created (or a binding key): at most MaxNameLen bytes of valid
// UTF-8. AMQP's codec cannot carry a longer name; HTTP and the direct Go
// channel can, so the check lives here, where all of them pass. A name that
// breaks it is refused with 406 PRECONDITION_FAILED and nothing is stored.
// RabbitMQ 4.x lets the management API create what AMQP cannot address;
// Warren does not.
func (v *VHost) checkName(kind, name string) error {
	if len(name) > MaxNameLen {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0,
			"%s name is %d bytes long, longer than %d in vhost '%s'", kind, len(name), MaxNameLen, v.cfg.Name)
	}
	if !utf8.ValidString(name) {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0,
			"%s name %q is not valid UTF-8 in vhost '%s'", kind, name, v.cfg.Name)
	}
	return nil
}

// checkArgsSize refuses an argument table whose encoding exceeds what a
// frame could carry, so that no door stores (and holds in memory, and
// replays at every start) a table AMQP could never have sent.
func (v *VHost) checkArgsSize(raw []byte, kind, name string) error {
	limit := v.cfg.MaxArgumentsSize
	if limit <= 0 {
		limit = DefaultMaxArgumentsSize
	}
	if len(raw) > limit {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0,
			"arguments of %s are %d bytes encoded, more than %d", v.resource(kind, name), len(raw), limit)
	}
	return nil
}

// checkBinding applies the shared limits to a binding being added: its key
// is a short string and its arguments fit a frame. (Its ends exist or the
// bind fails, so their names were checked when they were declared.)
func (v *VHost) checkBinding(b routing.Binding) error {
	if err := v.checkName("binding key", b.Key); err != nil {
		return err
	}
	raw, err := encodeArgs(b.Args)
	if err != nil {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid binding arguments: %v", err)
	}
	kind := "queue"
	if b.Destination.Exchange {
		kind = "exchange"
	}
	return v.checkArgsSize(raw, "binding to "+kind, b.Destination.Name)
}
