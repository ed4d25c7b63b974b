package amqp

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is an AMQP exception: the reply code and text that go into connection.close or
// channel.close, and the class and method ids of the method that caused it (0, 0 when
// no method did, e.g. for a malformed frame).
type Error struct {
	Code     uint16
	Text     string
	ClassID  uint16
	MethodID uint16
}

// NewError returns an Error whose Text is the formatted message prefixed with the
// code's name the way RabbitMQ words its reply texts ("NOT_FOUND - no queue 'q' in
// vhost '/'"). A message that already starts with that prefix is kept as is.
// Text longer than a short string (255 bytes) is cut when it is sent.
func NewError(code uint16, classID, methodID uint16, format string, args ...any) *Error {
	text := format
	if len(args) > 0 {
		text = fmt.Sprintf(format, args...)
	}
	if name, _, known := replyInfo(code); known {
		if prefix := name + " - "; !strings.HasPrefix(text, prefix) {
			text = prefix + text
		}
	}
	return &Error{Code: code, Text: text, ClassID: classID, MethodID: methodID}
}

// Error returns "amqp: <code> <text>", followed by the name of the method that
// caused it when the ids name one.
func (e *Error) Error() string {
	s := "amqp: " + strconv.Itoa(int(e.Code)) + " " + e.Text
	if name := methodName(e.ClassID, e.MethodID); name != "" {
		s += " (" + name + ")"
	}
	return s
}

// Hard reports whether the error closes the connection rather than the channel
// (spec §1.1: the reply codes of class hard-error). A code the spec does not know is
// treated as hard, because a peer cannot be expected to handle it on a channel.
func (e *Error) Hard() bool {
	_, hard, known := replyInfo(e.Code)
	return hard || !known
}

// CloseMethod returns the close method that reports the error to the peer:
// *ConnectionClose for a hard error, *ChannelClose otherwise. An error on channel 0
// (the handshake, e.g. 403 ACCESS_REFUSED for connection.open) always closes the
// connection whatever its code; that is the caller's call, it knows the channel.
func (e *Error) CloseMethod() Method {
	if e.Hard() {
		return &ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID}
	}
	return &ChannelClose{ReplyCode: e.Code, ReplyText: e.Text, ClassId: e.ClassID, MethodId: e.MethodID}
}

// ReplyName returns the spec's name of a reply code in RabbitMQ's spelling
// ("NOT_FOUND"), or "" for a code the spec does not define.
func ReplyName(code uint16) string {
	name, _, _ := replyInfo(code)
	return name
}

// detail returns the text without the "NAME - " prefix NewError added.
func (e *Error) detail() string {
	if name, _, known := replyInfo(e.Code); known {
		return strings.TrimPrefix(e.Text, name+" - ")
	}
	return e.Text
}
