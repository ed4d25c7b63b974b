package amqp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewError(t *testing.T) {
	for _, tc := range []struct {
		name            string
		err             *Error
		text, errString string
		hard            bool
	}{
		{
			name:      "soft with method",
			err:       NewError(NotFound, ClassQueue, MethodQueueDeclare, "no queue '%s' in vhost '%s'", "q", "/"),
			text:      "NOT_FOUND - no queue 'q' in vhost '/'",
			errString: "amqp: 404 NOT_FOUND - no queue 'q' in vhost '/' (queue.declare)",
		},
		{
			name:      "prefix already given",
			err:       NewError(PreconditionFailed, 0, 0, "PRECONDITION_FAILED - inequivalent arg"),
			text:      "PRECONDITION_FAILED - inequivalent arg",
			errString: "amqp: 406 PRECONDITION_FAILED - inequivalent arg",
		},
		{
			name:      "percent signs in arguments",
			err:       NewError(AccessRefused, 0, 0, "%s", "100% refused"),
			text:      "ACCESS_REFUSED - 100% refused",
			errString: "amqp: 403 ACCESS_REFUSED - 100% refused",
		},
		{
			name:      "hard",
			err:       NewError(FrameError, 0, 0, "bad frame"),
			text:      "FRAME_ERROR - bad frame",
			errString: "amqp: 501 FRAME_ERROR - bad frame",
			hard:      true,
		},
		{
			name:      "unknown method ids",
			err:       NewError(CommandInvalid, 99, 98, "what"),
			text:      "COMMAND_INVALID - what",
			errString: "amqp: 503 COMMAND_INVALID - what",
			hard:      true,
		},
		{
			name:      "unknown code is hard and unprefixed",
			err:       NewError(999, 0, 0, "odd"),
			text:      "odd",
			errString: "amqp: 999 odd",
			hard:      true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.text, tc.err.Text)
			require.Equal(t, tc.errString, tc.err.Error())
			require.Equal(t, tc.hard, tc.err.Hard())
		})
	}
}

func TestHardCodes(t *testing.T) {
	// Spec §1.1: the hard-error class.
	hard := map[uint16]bool{
		ConnectionForced: true, InvalidPath: true, FrameError: true, SyntaxError: true,
		CommandInvalid: true, ChannelError: true, UnexpectedFrame: true, ResourceError: true,
		NotAllowed: true, NotImplemented: true, InternalError: true,
	}
	for _, code := range []uint16{ReplySuccess, ContentTooLarge, NoRoute, NoConsumers, ConnectionForced,
		InvalidPath, AccessRefused, NotFound, ResourceLocked, PreconditionFailed, FrameError, SyntaxError,
		CommandInvalid, ChannelError, UnexpectedFrame, ResourceError, NotAllowed, NotImplemented, InternalError} {
		require.Equal(t, hard[code], (&Error{Code: code}).Hard(), "code %d", code)
		require.NotEmpty(t, ReplyName(code))
	}
	require.Equal(t, "NOT_FOUND", ReplyName(NotFound))
	require.Equal(t, "", ReplyName(1))
}

func TestCloseMethod(t *testing.T) {
	soft := NewError(NotFound, ClassBasic, MethodBasicConsume, "no queue")
	require.Equal(t, &ChannelClose{ReplyCode: 404, ReplyText: "NOT_FOUND - no queue", ClassId: 60, MethodId: 20}, soft.CloseMethod())
	hard := NewError(ChannelError, ClassChannel, MethodChannelOpen, "channel in use")
	require.Equal(t, &ConnectionClose{ReplyCode: 504, ReplyText: "CHANNEL_ERROR - channel in use", ClassId: 20, MethodId: 10}, hard.CloseMethod())
}
