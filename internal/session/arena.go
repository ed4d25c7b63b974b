package session

// The read's arena: small messages that arrive together share one
// allocation. A publish's properties and body are copied out of the read
// buffer (which the next read overwrites) into memory the stored record
// keeps; a message of at most maxCarved bytes that arrived with more
// frames behind it in the same read is carved out of an arena the size of
// what that read brought (at most arenaSize), instead of being allocated
// on its own. So a read of 256 small publishes costs a handful of
// allocations, not 256, and a lone message (a publisher at a low rate)
// still gets exactly its own size.
//
// Ownership: each carved piece is one message's properties and body, with
// its capacity cut at its own end, so no append through a record can
// reach its neighbour; the reader writes only the arena's uncarved tail,
// which no record refers to. The arena is garbage once every message in
// it is gone; until then it is kept whole, so a message that outlives its
// neighbours keeps up to arenaSize bytes, all of which arrived in the
// same read. The reader drops the tail when its read's frames are handled
// (handOverIfIdle), so an idle connection holds none.

const (
	// maxCarved is the largest message (properties and body) carved, and
	// arenaSize the largest arena.
	maxCarved = 256
	arenaSize = 4 << 10
)

// carve returns n bytes (length and capacity) for a message's
// properties and body out of the read's arena, or nil when the message
// gets an allocation of its own: it is large, nothing else is buffered
// behind it, or the connection has no reader that can tell.
func (c *Conn) carve(n int) []byte {
	if n > maxCarved || c.frames == nil {
		return nil
	}
	if len(c.arena) < n {
		more := c.frames.Buffered()
		if more == 0 {
			c.arena = nil
			return nil
		}
		// What arrived behind this message bounds what the arena can
		// be filled with.
		c.arena = make([]byte, min(arenaSize, n+more))
	}
	buf := c.arena[:n:n]
	c.arena = c.arena[n:]
	return buf
}
