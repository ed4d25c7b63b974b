package multiraft

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A proposal made with Propose carries an identity: its proposer, the
// proposer's incarnation (a number that grows with each opening of its
// database) and a sequence per group counted from 1 in that incarnation.
// Every replica applies a proposer's proposals to a group in that
// sequence, as RabbitMQ's rabbit_fifo applies an enqueuer's: an entry
// whose sequence is the next one applies, one already applied is a copy
// (the proposer proposed it again after a leader change) and is skipped,
// and one ahead of the next is skipped too and tells its proposer to
// propose again what it has not seen applied, in order. The table of
// next sequences is part of what every replica applies: committed with
// the applied record, carried in snapshots, so every replica decides the
// same. It holds one row per member that ever proposed to the group.

// envelopeV2 marks an entry's envelope of format 2 (with an identity): a
// proposer id is never 0, so format 1's first byte is never 0.
const envelopeV2 = 0

// appendEnvelope2 is the envelope of a proposal with an identity.
func appendEnvelope2(b []byte, proposer, inc, gseq, seq uint64) []byte {
	b = append(b, envelopeV2)
	b = binary.AppendUvarint(b, proposer)
	b = binary.AppendUvarint(b, inc)
	b = binary.AppendUvarint(b, gseq)
	return binary.AppendUvarint(b, seq)
}

// identity is a proposal's place in its proposer's sequence.
type identity struct {
	proposer, inc, gseq uint64
}

// parseEntry splits a normal entry into its proposal's number on its
// proposer, its identity (zero for format 1) and its command.
func parseEntry(b []byte) (id identity, seq uint64, cmd []byte, ok bool) {
	if len(b) == 0 || b[0] != envelopeV2 {
		p, s, c, ok := parseEnvelope(b)
		return identity{proposer: p}, s, c, ok
	}
	b = b[1:]
	var vals [4]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return identity{}, 0, nil, false
		}
		vals[i], b = v, b[n:]
	}
	if vals[0] == 0 || vals[2] == 0 {
		return identity{}, 0, nil, false
	}
	return identity{proposer: vals[0], inc: vals[1], gseq: vals[2]}, vals[3], b, true
}

// dedupRow is one proposer's row: its latest incarnation seen and the
// sequence of that incarnation to apply next.
type dedupRow struct {
	proposer, inc, next uint64
}

// dedupTable is a group's rows, sorted by proposer.
type dedupTable []dedupRow

// verdict is what the table says of an entry.
type verdict int

const (
	applyIt verdict = iota // the next of its proposer
	copyOf                 // applied already, or from a proposer's earlier incarnation
	ahead                  // an earlier one of its proposer is missing
)

// admit decides on the entry of id and, when it applies, advances the
// table. Entries of format 1 (no identity) always apply.
func (t *dedupTable) admit(id identity) verdict {
	if id.gseq == 0 {
		return applyIt
	}
	i, found := slices.BinarySearchFunc(*t, id.proposer, func(r dedupRow, p uint64) int {
		return cmp.Compare(r.proposer, p)
	})
	if !found {
		*t = slices.Insert(*t, i, dedupRow{proposer: id.proposer, inc: id.inc, next: 1})
	}
	r := &(*t)[i]
	switch {
	case id.inc < r.inc:
		return copyOf // nobody waits for a proposer that restarted since
	case id.inc > r.inc:
		r.inc, r.next = id.inc, 1
	}
	switch {
	case id.gseq < r.next:
		return copyOf
	case id.gseq > r.next:
		return ahead
	}
	r.next++
	return applyIt
}

// next is the sequence of proposer's incarnation inc to apply next.
func (t dedupTable) next(proposer, inc uint64) uint64 {
	for _, r := range t {
		if r.proposer == proposer && r.inc == inc {
			return r.next
		}
	}
	return 1
}

// dedupVersion is the first byte of an encoded table.
const dedupVersion = 1

// maxDedupRows bounds a decoded table: one row per member ever proposing.
const maxDedupRows = 1 << 16

func encodeDedup(t dedupTable) []byte {
	b := []byte{dedupVersion}
	b = binary.AppendUvarint(b, uint64(len(t)))
	for _, r := range t {
		b = binary.AppendUvarint(b, r.proposer)
		b = binary.AppendUvarint(b, r.inc)
		b = binary.AppendUvarint(b, r.next)
	}
	return b
}

var errDedup = errors.New("multiraft: proposal table does not decode")

func decodeDedup(b []byte) (dedupTable, error) {
	if len(b) == 0 || b[0] != dedupVersion {
		return nil, fmt.Errorf("%w: version", errDedup)
	}
	b = b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxDedupRows || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: row count", errDedup)
	}
	b = b[k:]
	t := make(dedupTable, 0, n)
	for range n {
		var vals [3]uint64
		for i := range vals {
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, fmt.Errorf("%w: short row", errDedup)
			}
			vals[i], b = v, b[k:]
		}
		r := dedupRow{proposer: vals[0], inc: vals[1], next: vals[2]}
		if r.proposer == 0 || r.next == 0 || len(t) > 0 && t[len(t)-1].proposer >= r.proposer {
			return nil, fmt.Errorf("%w: bad row", errDedup)
		}
		t = append(t, r)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after it", errDedup, len(b))
	}
	return t, nil
}

// The table's key, "q" group (8), beside the applied record.
func dedupKey(group uint64) []byte { return groupKey('q', group) }

// loadDedup reads group's table; none (a group of an earlier version, or
// to which no proposal with an identity was applied) is empty.
func (s *store) loadDedup(group uint64) (dedupTable, error) {
	v, ok, err := getCopy(s.db, dedupKey(group))
	if err != nil || !ok {
		return nil, err
	}
	t, err := decodeDedup(v)
	if err != nil {
		return nil, fmt.Errorf("multiraft: group %d: %w", group, err)
	}
	return t, nil
}

// snapDedupMark opens the data of a snapshot sent to a replica that
// carries the group's table ahead of the state machine's snapshot: the
// mark, the table's length (uvarint), the table. A snapshot without it
// (from an earlier version) carries an empty table.
var snapDedupMark = []byte("\x00warren-multiraft proposals\x01")

func wrapSnapshot(t dedupTable, sm []byte) []byte {
	enc := encodeDedup(t)
	b := make([]byte, 0, len(snapDedupMark)+binary.MaxVarintLen64+len(enc)+len(sm))
	b = append(b, snapDedupMark...)
	b = binary.AppendUvarint(b, uint64(len(enc)))
	b = append(b, enc...)
	return append(b, sm...)
}

// unwrapSnapshot splits a snapshot's data into its table and the state
// machine's snapshot.
func unwrapSnapshot(b []byte) (dedupTable, []byte, error) {
	if !bytes.HasPrefix(b, snapDedupMark) {
		return nil, b, nil
	}
	b = b[len(snapDedupMark):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: snapshot's table length", errDedup)
	}
	t, err := decodeDedup(b[k : k+int(n)])
	if err != nil {
		return nil, nil, err
	}
	return t, b[k+int(n):], nil
}

// incarnationKey holds the member's last incarnation.
var incarnationKey = []byte("i")

// nextIncarnation returns a number greater than any this database handed
// out before and records it, synced: the clock's nanoseconds, or one more
// than the last when the clock went back.
func (s *store) nextIncarnation() (uint64, error) {
	inc := uint64(time.Now().UnixNano())
	v, ok, err := getCopy(s.db, incarnationKey)
	if err != nil {
		return 0, err
	}
	if ok && len(v) == 8 {
		if last := binary.BigEndian.Uint64(v); last >= inc {
			inc = last + 1
		}
	}
	if err := s.db.Set(incarnationKey, binary.BigEndian.AppendUint64(nil, inc), pebble.Sync); err != nil {
		return 0, err
	}
	return inc, nil
}
