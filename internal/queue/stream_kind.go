package queue

import "context"

// A stream is a queue kind (kind.go): *streamState answers the actor's
// questions with the log's own ways.

// handles reports the ops a stream runs its own way (execStream): the
// publishes it stamps and keeps, the settles that move offsets, its
// consumers, the refused get and purge, retention, and delete.
func (s *streamState) handles(k opKind) bool {
	switch k {
	case opPublish, opAck, opReject, opRequeue, opRequeueEntries, opConsume, opCancel,
		opGet, opPurge, opRetention, opTouch, opUnused, opTimer, opDelete:
		return true
	}
	return false
}

func (s *streamState) exec(ctx context.Context, o op) reply {
	r, _ := s.q.execStream(ctx, o)
	return r
}

// dispatch applies retention, then feeds each reader from its offset.
func (s *streamState) dispatch(ctx context.Context) {
	s.retain(ctx)
	s.q.streamDispatch(ctx)
}

func (s *streamState) applyArgs(ctx context.Context, a Args) { s.q.applyStreamArgs(ctx, a) }

// trim keeps the read buffer: the readers share it.
func (s *streamState) trim() {}

// drain saves the offsets of tracking consumers that the last acks
// moved, unless the stream was deleted.
func (s *streamState) drain(ctx context.Context) {
	if !s.q.deleted {
		s.saveOffsets(ctx) // acks the mailbox held
	}
}

// stopTimers stops the x-max-age retention timer.
func (s *streamState) stopTimers() {
	if s.ageTimer != nil {
		s.ageTimer.Stop()
	}
}

// release drops the readers, the tracked offsets and the segments.
func (s *streamState) release() {
	s.readers, s.tracked, s.unsaved, s.segs = nil, nil, nil, nil
}
