package vhost

import (
	"fmt"
	"reflect"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
)

// The replies a declare, bind or delete is refused with, in RabbitMQ's
// words (its rabbit_misc:protocol_error texts), and how a redeclare's
// argument values are compared and quoted in them.

func notFound(kind, name, vhost string) *amqp.Error {
	return amqp.NewError(amqp.NotFound, 0, 0, "no %s '%s' in vhost '%s'", kind, name, vhost)
}

func defaultExchangeError() *amqp.Error {
	return amqp.NewError(amqp.AccessRefused, 0, 0, "operation not permitted on the default exchange")
}

func (v *VHost) resource(kind, name string) string {
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, v.cfg.Name)
}

// inequivalent is RabbitMQ's equivalence_fail for a property
// (durable, auto_delete, type, internal): both values quoted.
func inequivalent(arg, kind, name, vhost string, received, current any) *amqp.Error {
	return inequivalentText(arg, kind, name, vhost, fmt.Sprintf("'%v'", received), fmt.Sprintf("'%v'", current))
}

// inequivalentArg is equivalence_fail for an x-argument, which RabbitMQ
// (rabbit_misc:assert_args_equivalence1 and val/1) words by what the two
// sides hold: both present, their values quoted ("received '5' but current
// is '3'"); one absent, that one "none" and the other with its field type
// ("received none but current is the value '10' of type 'signedint'").
func inequivalentArg(arg, kind, name, vhost string, received any, rok bool, current any, cok bool) *amqp.Error {
	if rok && cok {
		return inequivalentText(arg, kind, name, vhost, "'"+fmtArg(received)+"'", "'"+fmtArg(current)+"'")
	}
	return inequivalentText(arg, kind, name, vhost, typedArg(received, rok), typedArg(current, cok))
}

func inequivalentText(arg, kind, name, vhost, received, current string) *amqp.Error {
	return amqp.NewError(amqp.PreconditionFailed, 0, 0,
		"inequivalent arg '%s' for %s '%s' in vhost '%s': received %s but current is %s",
		arg, kind, name, vhost, received, current)
}

func lockedError(name, vhost string) *amqp.Error {
	return amqp.NewError(amqp.ResourceLocked, 0, 0,
		"cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.",
		name, vhost)
}

// storeError reports a metadata store failure as 541 INTERNAL_ERROR: the
// declaration did not happen, and the client learns why.
func storeError(err error) *amqp.Error {
	return amqp.NewError(amqp.InternalError, 0, 0, "metadata store: %v", err)
}

// sameArg compares two argument values the way RabbitMQ's
// rabbit_misc:assert_args_equivalence does: integers of any width by value,
// floats by value, anything else only if type and value are the same (a long
// string never equals a byte array). Never ==, which panics on the []byte,
// table and array values a client may send.
func sameArg(a, b any) bool {
	if ai, ok := queue.IntArg(a); ok {
		bi, ok := queue.IntArg(b)
		return ok && ai == bi
	}
	if af, ok := asFloat(a); ok {
		bf, ok := asFloat(b)
		return ok && af == bf
	}
	if at, ok := a.(time.Time); ok {
		bt, ok := b.(time.Time)
		return ok && at.Equal(bt)
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && reflect.DeepEqual(a, b)
}

func asFloat(v any) (float64, bool) {
	switch f := v.(type) {
	case float32:
		return float64(f), true
	case float64:
		return f, true
	}
	return 0, false
}

// fieldType names a value's AMQP field type as RabbitMQ's messages do.
func fieldType(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case amqp.Decimal:
		return "decimal"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case time.Time:
		return "timestamp"
	case nil:
		return "void"
	case []any:
		return "array"
	case amqp.Table, map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

// fmtArg formats an argument's value for an inequivalent-arg message.
func fmtArg(v any) string {
	if b, isBytes := v.([]byte); isBytes {
		return string(b)
	}
	return fmt.Sprint(v)
}

// typedArg is RabbitMQ's val/1 of one side of an argument: "none" when
// absent, else the value and its field type.
func typedArg(v any, ok bool) string {
	if !ok {
		return "none"
	}
	return "the value '" + fmtArg(v) + "' of type '" + fieldType(v) + "'"
}
