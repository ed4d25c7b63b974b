package multiraft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// The frames of a member pair's connection, after the handshake (and
// inside its sealed records when there is a cluster secret):
//
//	frame      length (4, big endian, of what follows) | type (1) | body
//	messages   count (uvarint) | count × (group (uvarint) | size (uvarint) | raftpb.Message)
//	beats      count (uvarint) | count × (group (uvarint) | term (uvarint) | commit (uvarint) | flags (1))
//	ping       empty: the pair's liveness beat, sent when nothing else was
//
// A beats frame is every group's heartbeats (and heartbeat responses) of
// one cycle between the pair, coalesced: from and to are the pair's, so a
// group's beat is a few bytes, not a raft message. The flag beatQuiesce on
// a heartbeat asks the follower to stop ticking the group with its leader.
const (
	frameMessages byte = 1
	frameBeats    byte = 2
	framePing     byte = 3

	beatResponse byte = 1 << 0
	beatQuiesce  byte = 1 << 1

	frameHeader = 5
)

// errFrame is a frame this protocol cannot have sent.
var errFrame = errors.New("multiraft: malformed frame")

// groupMsg is one group's raft message.
type groupMsg struct {
	group uint64
	msg   raftpb.Message
}

// beat is one group's heartbeat or heartbeat response in a beats frame.
type beat struct {
	group  uint64
	term   uint64
	commit uint64
	flags  byte
}

// frame is a decoded frame.
type frame struct {
	kind  byte
	msgs  []groupMsg
	beats []beat
}

// appendMessages appends a messages frame of msgs to b.
func appendMessages(b []byte, msgs []groupMsg) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, frameMessages)
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for i := range msgs {
		m := &msgs[i].msg
		b = binary.AppendUvarint(b, msgs[i].group)
		size := m.Size()
		b = binary.AppendUvarint(b, uint64(size))
		at := len(b)
		b = append(b, make([]byte, size)...)
		if _, err := m.MarshalTo(b[at:]); err != nil {
			return b[:start], fmt.Errorf("multiraft: marshal a message of group %d: %w", msgs[i].group, err)
		}
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b, nil
}

// appendBeats appends a beats frame of beats to b.
func appendBeats(b []byte, beats []beat) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, frameBeats)
	b = binary.AppendUvarint(b, uint64(len(beats)))
	for _, h := range beats {
		b = binary.AppendUvarint(b, h.group)
		b = binary.AppendUvarint(b, h.term)
		b = binary.AppendUvarint(b, h.commit)
		b = append(b, h.flags)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// appendPing appends a ping frame to b.
func appendPing(b []byte) []byte {
	return append(b, 0, 0, 0, 1, framePing)
}

// readFrame reads one frame from r into buf (grown as needed, never past
// maxFrame) and decodes it. It returns the buffer for the next call.
func readFrame(r io.Reader, buf []byte, maxFrame int) (frame, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, buf, err
	}
	size := int(binary.BigEndian.Uint32(hdr[:]))
	if size < 1 || size > maxFrame {
		return frame{}, buf, fmt.Errorf("%w: a frame of %d bytes (at most %d)", errFrame, size, maxFrame)
	}
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		return frame{}, buf, noEOF(err)
	}
	f, err := decodeFrame(buf)
	return f, buf, err
}

// decodeFrame decodes a frame's type and body (what follows the length).
// The messages it returns do not alias b.
func decodeFrame(b []byte) (frame, error) {
	if len(b) < 1 {
		return frame{}, fmt.Errorf("%w: empty", errFrame)
	}
	f := frame{kind: b[0]}
	body := b[1:]
	switch f.kind {
	case framePing:
		if len(body) != 0 {
			return frame{}, fmt.Errorf("%w: a ping with a body", errFrame)
		}
		return f, nil
	case frameMessages, frameBeats:
	default:
		return frame{}, fmt.Errorf("%w: type %d", errFrame, f.kind)
	}
	count, body, err := uvarint(body)
	if err != nil {
		return frame{}, err
	}
	// Each item takes at least 2 bytes (messages) or 4 (beats): a count
	// past that is a lie, refused before anything is allocated for it.
	minItem := uint64(2)
	if f.kind == frameBeats {
		minItem = 4
	}
	if count > uint64(len(body))/minItem {
		return frame{}, fmt.Errorf("%w: %d items in %d bytes", errFrame, count, len(body))
	}
	if f.kind == frameBeats {
		f.beats = make([]beat, 0, count)
		for range count {
			var h beat
			if h.group, body, err = uvarint(body); err != nil {
				return frame{}, err
			}
			if h.term, body, err = uvarint(body); err != nil {
				return frame{}, err
			}
			if h.commit, body, err = uvarint(body); err != nil {
				return frame{}, err
			}
			if len(body) < 1 || body[0]&^(beatResponse|beatQuiesce) != 0 {
				return frame{}, fmt.Errorf("%w: beat flags", errFrame)
			}
			h.flags, body = body[0], body[1:]
			if h.group == 0 || h.term == 0 || h.term > maxTerm || h.commit > maxIndex {
				return frame{}, fmt.Errorf("%w: beat of group %d, term %d, commit %d", errFrame, h.group, h.term, h.commit)
			}
			f.beats = append(f.beats, h)
		}
	} else {
		f.msgs = make([]groupMsg, 0, count)
		for range count {
			var gm groupMsg
			if gm.group, body, err = uvarint(body); err != nil {
				return frame{}, err
			}
			var size uint64
			if size, body, err = uvarint(body); err != nil {
				return frame{}, err
			}
			if gm.group == 0 || size > uint64(len(body)) {
				return frame{}, fmt.Errorf("%w: message of group %d, %d bytes", errFrame, gm.group, size)
			}
			if err := gm.msg.Unmarshal(body[:size]); err != nil {
				return frame{}, fmt.Errorf("%w: group %d: %v", errFrame, gm.group, err)
			}
			body = body[size:]
			f.msgs = append(f.msgs, gm)
		}
	}
	if len(body) != 0 {
		return frame{}, fmt.Errorf("%w: %d bytes after the last item", errFrame, len(body))
	}
	return f, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad varint", errFrame)
	}
	return v, b[n:], nil
}
