package direct

import (
	"errors"
	"reflect"
	"unsafe"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// PublishWithDeferredConfirm must return amqp091-go's own
// *DeferredConfirmation, or an application interface written over
// *amqp091.Channel would not accept a *Channel. amqp091-go creates them
// only inside its package: outside it, the zero value has no done channel
// (Done returns nil, Wait blocks for ever) and no exported function sets
// one. So the Channel fills in the two unexported fields the type's
// methods read, done (closed once the confirm came) and ack, through their
// offsets, exactly as amqp091-go's deferredConfirmations.Add and setAck
// do: done made before the value is handed out, ack written before done
// is closed, so Done, Acked, Wait and WaitContext are amqp091-go's code
// reading what amqp091-go would have written. The offsets are found by
// name and type when the package loads; should a later amqp091-go rename
// or retype them, deferredUsable is false and PublishWithDeferredConfirm
// returns errDeferredUnusable instead of a value that would never be done
// (TestDeferredConfirmationFields fails first).
var deferredOffsets = findDeferredFields()

type deferredFields struct {
	done, ack uintptr
	ok        bool
}

func findDeferredFields() deferredFields {
	t := reflect.TypeFor[amqp091.DeferredConfirmation]()
	done, ok1 := t.FieldByName("done")
	ack, ok2 := t.FieldByName("ack")
	if !ok1 || !ok2 || done.Type != reflect.TypeFor[chan struct{}]() || ack.Type != reflect.TypeFor[bool]() {
		return deferredFields{}
	}
	return deferredFields{done: done.Offset, ack: ack.Offset, ok: true}
}

// deferredUsable reports whether this amqp091-go's DeferredConfirmation has
// the fields the Channel fills in.
func deferredUsable() bool { return deferredOffsets.ok }

var errDeferredUnusable = errors.New("broker: this amqp091-go's DeferredConfirmation has no done and ack fields to fill in; use NotifyPublish")

// newDeferred returns a pending DeferredConfirmation for sequence number
// tag, as amqp091-go's deferredConfirmations.Add makes one.
func newDeferred(tag uint64) *amqp091.DeferredConfirmation {
	dc := &amqp091.DeferredConfirmation{DeliveryTag: tag}
	*(*chan struct{})(unsafe.Add(unsafe.Pointer(dc), deferredOffsets.done)) = make(chan struct{})
	return dc
}

// settleDeferred records the confirm and wakes the waiters, as
// amqp091-go's setAck does. It must be called once per dc.
func settleDeferred(dc *amqp091.DeferredConfirmation, ack bool) {
	*(*bool)(unsafe.Add(unsafe.Pointer(dc), deferredOffsets.ack)) = ack
	close(*(*chan struct{})(unsafe.Add(unsafe.Pointer(dc), deferredOffsets.done)))
}

// settleDeferredLocked settles the DeferredConfirmations a basic.ack or
// basic.nack covers the moment it arrives, as amqp091-go does (before the
// in-order NotifyPublish listeners hear of it).
func (ch *Channel) settleDeferredLocked(tag uint64, multiple, ack bool) {
	d := ch.mu.deferred
	if len(d) == 0 {
		return
	}
	if !multiple {
		if dc := d[tag]; dc != nil {
			delete(d, tag)
			settleDeferred(dc, ack)
		}
		return
	}
	// Every sequence number below confirmNext was confirmed already.
	for n := ch.mu.confirmNext; n <= min(tag, ch.published.Load()) && len(d) > 0; n++ {
		if dc := d[n]; dc != nil {
			delete(d, n)
			settleDeferred(dc, ack)
		}
	}
}
