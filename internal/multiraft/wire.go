package multiraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/raftlink"
)

// The frames between a member pair, after the handshake (and inside its
// sealed records when there is a cluster secret):
//
//	frame      length (4, big endian, of what follows) | type (1) | body
//	messages   count (uvarint) | count × (group (uvarint) | size (uvarint) | raftpb.Message)
//	beats      count (uvarint) | count × (group (uvarint) | term (uvarint) | commit (uvarint) | flags (1))
//	ping       empty: the pair's liveness beat, sent when nothing else was
//	chunk      group (uvarint) | total (uvarint) | offset (uvarint) | size (uvarint) | raftpb.Message | data
//
// A snapshot message whose data does not fit in one chunk's worth of a
// frame (chunkSize) travels as chunk frames: each carries the MsgSnap
// without its data (the same in every chunk: it names the transfer), the
// data's total length, and the bytes at offset; the receiver
// (snapStaging) reassembles them in order and steps the whole message
// once the last has arrived.
//
// A beats frame is every group's heartbeats and heartbeat responses of one
// cycle between the pair, coalesced: from and to are the pair's, so a
// group's beat is a few bytes, not a raft message. The flag beatQuiesce
// on a heartbeat tells the follower its leader stopped ticking the group.
const (
	frameMessages byte = 1
	frameBeats    byte = 2
	framePing     byte = 3
	frameChunk    byte = 4

	beatResponse byte = 1 << 0
	beatQuiesce  byte = 1 << 1
)

// errFrame is a frame this protocol cannot have sent, or one that carries
// what no member sends.
var errFrame = errors.New("multiraft: malformed frame")

// groupMsg is one group's raft message.
type groupMsg struct {
	group uint64
	msg   *raftpb.Message
}

// beat is one group's heartbeat or heartbeat response in a beats frame.
type beat struct {
	group  uint64
	term   uint64
	commit uint64
	flags  byte
}

// snapChunk is one piece of a snapshot message's data: msg is the
// message without its data.
type snapChunk struct {
	group  uint64
	total  uint64
	offset uint64
	msg    *raftpb.Message
	data   []byte
}

// frame is one decoded frame, or one cycle's outgoing batch to a peer
// (which encodeBatch may write as several frames).
type frame struct {
	kind  byte
	msgs  []groupMsg
	beats []beat
	chunk *snapChunk
}

// chunkSize is the snapshot data a chunk frame carries under a frame
// limit of maxFrame: at most 1 MiB, and half the frame at most, so that
// the message beside it fits.
func chunkSize(maxFrame int) int {
	return min(1<<20, maxFrame/2)
}

// appendChunks appends gm, a snapshot message, as chunk frames of at most
// maxFrame bytes; false when even its message without data does not fit.
func appendChunks(b []byte, gm groupMsg, maxFrame int) ([]byte, bool) {
	data := gm.msg.GetSnapshot().GetData()
	env := proto.Clone(gm.msg).(*raftpb.Message)
	env.Snapshot.Data = nil
	envSize := proto.Size(env)
	step := chunkSize(maxFrame)
	if step <= 0 || envSize+4*binary.MaxVarintLen64+5+step > maxFrame {
		return b, false
	}
	for off := 0; off < len(data); off += step {
		piece := data[off:min(off+step, len(data))]
		start := len(b)
		b = append(b, 0, 0, 0, 0, frameChunk)
		b = binary.AppendUvarint(b, gm.group)
		b = binary.AppendUvarint(b, uint64(len(data)))
		b = binary.AppendUvarint(b, uint64(off))
		b = binary.AppendUvarint(b, uint64(envSize))
		b, _ = proto.MarshalOptions{}.MarshalAppend(b, env)
		b = append(b, piece...)
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	}
	return b, true
}

// appendFrames appends f's messages and beats as frames to b, or a ping
// when it has neither. Messages are split into frames of at most about
// maxFrame bytes; one message larger than that is dropped (the peer would
// refuse it; raft resends what matters), and reported in dropped.
func appendFrames(b []byte, f *frame, maxFrame int) (out []byte, dropped []groupMsg) {
	if len(f.msgs) == 0 && len(f.beats) == 0 {
		return append(b, 0, 0, 0, 1, framePing), nil
	}
	var big []groupMsg
	for rest := f.msgs; len(rest) > 0; {
		start := len(b)
		b = append(b, 0, 0, 0, 0, frameMessages)
		countAt := len(b)
		b = append(b, make([]byte, binary.MaxVarintLen64)...) // the count, fixed width below
		n := 0
		for len(rest) > 0 {
			gm := rest[0]
			if len(gm.msg.GetSnapshot().GetData()) > chunkSize(maxFrame) {
				// Its chunks go in frames of their own, after the
				// messages (raft sends a snapshot message alone: no
				// message of its group follows it in the batch).
				big = append(big, gm)
				rest = rest[1:]
				continue
			}
			size := proto.Size(gm.msg)
			if size+2*binary.MaxVarintLen64+6 > maxFrame {
				dropped = append(dropped, gm)
				rest = rest[1:]
				continue
			}
			if n > 0 && len(b)-start+size+2*binary.MaxVarintLen64 > maxFrame {
				break
			}
			b = binary.AppendUvarint(b, gm.group)
			b = binary.AppendUvarint(b, uint64(size))
			b, _ = proto.MarshalOptions{}.MarshalAppend(b, gm.msg)
			rest = rest[1:]
			n++
		}
		if n == 0 {
			b = b[:start]
			continue
		}
		putFixedUvarint(b[countAt:countAt+binary.MaxVarintLen64], uint64(n))
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	}
	for _, gm := range big {
		var ok bool
		if b, ok = appendChunks(b, gm, maxFrame); !ok {
			dropped = append(dropped, gm)
		}
	}
	if len(f.beats) > 0 {
		start := len(b)
		b = append(b, 0, 0, 0, 0, frameBeats)
		b = binary.AppendUvarint(b, uint64(len(f.beats)))
		for _, h := range f.beats {
			b = binary.AppendUvarint(b, h.group)
			b = binary.AppendUvarint(b, h.term)
			b = binary.AppendUvarint(b, h.commit)
			b = append(b, h.flags)
		}
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	}
	return b, dropped
}

// putFixedUvarint writes v as a uvarint padded to len(dst) bytes with
// continuation bits (a valid, non-minimal uvarint), so the count can be
// written after the items.
func putFixedUvarint(dst []byte, v uint64) {
	for i := range dst {
		dst[i] = byte(v&0x7f) | 0x80
		v >>= 7
	}
	dst[len(dst)-1] &^= 0x80
}

// decodeFrame decodes a frame's type and body (what follows its length)
// that member from sent to member self, and checks it as raft's Step
// needs: every message passes raftlink.CheckMessage and is from from to
// self, every beat names a group and a term within bounds. The messages
// it returns do not alias b.
func decodeFrame(b []byte, from, self uint64) (frame, error) {
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
	case frameChunk:
		c, err := decodeChunk(body, from, self)
		if err != nil {
			return frame{}, err
		}
		f.chunk = c
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
	if count == 0 || count > uint64(len(body))/minItem {
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
			if len(body) < 1 {
				return frame{}, fmt.Errorf("%w: a beat without flags", errFrame)
			}
			h.flags, body = body[0], body[1:]
			switch {
			case checkGroupID(h.group) != nil, h.term == 0, h.term > raftlink.MaxTerm, h.commit > raftlink.MaxIndex,
				h.flags&^(beatResponse|beatQuiesce) != 0, h.flags == beatResponse|beatQuiesce,
				h.flags&beatResponse != 0 && h.commit != 0:
				return frame{}, fmt.Errorf("%w: a beat of group %d, term %d, commit %d, flags %#x", errFrame, h.group, h.term, h.commit, h.flags)
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
			if checkGroupID(gm.group) != nil || size > uint64(len(body)) {
				return frame{}, fmt.Errorf("%w: a message of group %d, %d bytes", errFrame, gm.group, size)
			}
			gm.msg = &raftpb.Message{}
			if err := proto.Unmarshal(body[:size], gm.msg); err != nil {
				return frame{}, fmt.Errorf("%w: group %d: %v", errFrame, gm.group, err)
			}
			if gm.msg.GetFrom() != from {
				return frame{}, fmt.Errorf("%w: group %d: a message from %d on member %d's connection", errFrame, gm.group, gm.msg.GetFrom(), from)
			}
			if err := raftlink.CheckMessage(gm.msg, self); err != nil {
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

// decodeChunk decodes and checks a chunk frame's body: its message is a
// snapshot message without data from from to self that raftlink accepts,
// and its data a non-empty piece within the total. The total itself is
// bounded by the receiver (snapStaging), not here.
func decodeChunk(body []byte, from, self uint64) (*snapChunk, error) {
	c := &snapChunk{}
	var err error
	if c.group, body, err = uvarint(body); err != nil {
		return nil, err
	}
	if c.total, body, err = uvarint(body); err != nil {
		return nil, err
	}
	if c.offset, body, err = uvarint(body); err != nil {
		return nil, err
	}
	var size uint64
	if size, body, err = uvarint(body); err != nil {
		return nil, err
	}
	if checkGroupID(c.group) != nil || size > uint64(len(body)) {
		return nil, fmt.Errorf("%w: a chunk of group %d, message of %d bytes", errFrame, c.group, size)
	}
	c.msg = &raftpb.Message{}
	if err := proto.Unmarshal(body[:size], c.msg); err != nil {
		return nil, fmt.Errorf("%w: chunk of group %d: %v", errFrame, c.group, err)
	}
	body = body[size:]
	switch {
	case c.msg.GetType() != raftpb.MsgSnap || c.msg.GetSnapshot() == nil || len(c.msg.GetSnapshot().GetData()) != 0:
		return nil, fmt.Errorf("%w: chunk of group %d: not a snapshot message without data", errFrame, c.group)
	case c.msg.GetFrom() != from:
		return nil, fmt.Errorf("%w: chunk of group %d: a message from %d on member %d's connection", errFrame, c.group, c.msg.GetFrom(), from)
	case len(body) == 0 || c.offset >= c.total || uint64(len(body)) > c.total-c.offset:
		return nil, fmt.Errorf("%w: chunk of group %d: %d bytes at %d of %d", errFrame, c.group, len(body), c.offset, c.total)
	}
	if err := raftlink.CheckMessage(c.msg, self); err != nil {
		return nil, fmt.Errorf("%w: chunk of group %d: %v", errFrame, c.group, err)
	}
	c.data = bytes.Clone(body)
	return c, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad varint", errFrame)
	}
	return v, b[n:], nil
}
