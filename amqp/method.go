package amqp

import "encoding/binary"

// Method is one AMQP method: a generated struct per method of the spec (spec.go), with
// pointer receivers. AppendArgs and DecodeArgs handle the arguments only; AppendMethod,
// DecodeMethod and AppendMethodFrame add the class and method ids and the frame.
type Method interface {
	ClassID() uint16
	MethodID() uint16
	Name() string     // "basic.publish"
	HasContent() bool // followed by a content header and body frames
	// AppendArgs appends the arguments in wire format: consecutive bit fields share
	// octets (§4.2.5.2), short strings longer than 255 bytes are cut, table values
	// that cannot be encoded are written as void (see Table.Validate).
	AppendArgs(dst []byte) []byte
	// DecodeArgs decodes exactly the arguments in src; truncated, malformed or
	// trailing input returns a *Error with code SyntaxError. Strings are copied,
	// so the struct never aliases src.
	DecodeArgs(src []byte) error
}

// NewMethod returns a new zero value of the struct for the ids. Ids the spec does not
// define return a *Error with code CommandInvalid carrying those ids, ready to be sent
// back in connection.close.
func NewMethod(classID, methodID uint16) (Method, error) {
	if m := newMethod(classID, methodID); m != nil {
		return m, nil
	}
	return nil, NewError(CommandInvalid, classID, methodID, "unknown method: class %d, method %d", classID, methodID)
}

// AppendMethod appends a method frame payload: class id, method id, arguments.
func AppendMethod(dst []byte, m Method) []byte {
	dst = appendUint16(dst, m.ClassID())
	dst = appendUint16(dst, m.MethodID())
	return m.AppendArgs(dst)
}

// MethodIDs splits a method frame payload into its ids and arguments without
// allocating, so a hot path can switch on the ids and decode into a struct it reuses.
// A payload shorter than the two ids is a malformed frame: *Error FrameError.
func MethodIDs(payload []byte) (classID, methodID uint16, args []byte, err error) {
	if len(payload) < 4 {
		return 0, 0, nil, NewError(FrameError, 0, 0, "method frame payload of %d bytes is shorter than its class and method ids", len(payload))
	}
	return binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:]), payload[4:], nil
}

// DecodeMethod decodes a method frame payload into a new struct. Errors are *Error:
// FrameError for a payload too short for the ids, CommandInvalid for unknown ids,
// SyntaxError for malformed arguments.
func DecodeMethod(payload []byte) (Method, error) {
	classID, methodID, args, err := MethodIDs(payload)
	if err != nil {
		return nil, err
	}
	m, err := NewMethod(classID, methodID)
	if err != nil {
		return nil, err
	}
	if err := m.DecodeArgs(args); err != nil {
		return nil, err
	}
	return m, nil
}
