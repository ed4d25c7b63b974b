package raft

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/warrenmq/broker/storage"
)

// TestMarkOutcome: the errors after which an append may still be applied
// match storage.ErrOutcomeUnknown (and still their cause); those after
// which it certainly was not do not.
func TestMarkOutcome(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		ctxErr  error
		unknown bool
	}{
		{"leader changed", ErrLeaderChanged, nil, true},
		{"state replaced", ErrStateReplaced, nil, true},
		{"stopped while waiting", fmt.Errorf("%w: disk", ErrStopped), nil, true},
		{"context ended in flight", context.DeadlineExceeded, nil, true},
		{"context done before the call", context.Canceled, context.Canceled, false},
		{"forwarded proposal lost", ErrProposalLost, nil, true},
		{"proposal dropped", fmt.Errorf("raft: propose: %w", raft.ErrProposalDropped), nil, false},
		{"not forwarded", ErrNotProposed, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("queue: store q: %w", markOutcome(tc.err, tc.ctxErr))
			require.Equal(t, tc.unknown, errors.Is(err, storage.ErrOutcomeUnknown))
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, "queue: store q: "+tc.err.Error(), err.Error())
		})
	}
	require.NoError(t, markOutcome(nil, nil))
}
