package routing

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Message is what routing may read of a published message besides its
// routing keys: the headers table (headers exchanges, and hash exchanges
// with hash-header) and the three properties a consistent-hash exchange
// can hash on (hash-property). The zero Message is a message without
// headers or properties.
type Message struct {
	Headers       map[string]any
	MessageID     string
	CorrelationID string
	// Timestamp is the timestamp property in seconds; HasTimestamp says
	// the message carries one.
	Timestamp    int64
	HasTimestamp bool
}

// The properties hash-property may name, as RabbitMQ's consistent-hash
// exchange accepts them.
const (
	PropertyMessageID     = "message_id"
	PropertyCorrelationID = "correlation_id"
	PropertyTimestamp     = "timestamp"
)

// HashOn is what a consistent-hash exchange hashes: the routing key (the
// zero HashOn), a header (hash-header) or a property (hash-property).
type HashOn struct {
	Header   string
	Property string
}

// ParseHashArgs reads the hash-header and hash-property arguments of an
// x-consistent-hash exchange the way RabbitMQ's plugin validates them
// (rabbit_exchange_type_consistent_hash:validate, 3.8 to 4.x): each a long
// string, not both, and hash-property one of message_id, correlation_id,
// timestamp. Errors wrap ErrInvalidArgument (406 PRECONDITION_FAILED).
func ParseHashArgs(args map[string]any) (HashOn, error) {
	var h HashOn
	for _, arg := range []string{"hash-header", "hash-property"} {
		v, ok := args[arg]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString {
			return HashOn{}, fmt.Errorf("%w: %s must be a string, not %T", ErrInvalidArgument, arg, v)
		}
		if arg == "hash-header" {
			h.Header = s
		} else {
			h.Property = s
		}
	}
	_, hasHeader := args["hash-header"]
	_, hasProperty := args["hash-property"]
	switch {
	case hasHeader && hasProperty:
		return HashOn{}, fmt.Errorf("%w: hash-header and hash-property are mutually exclusive", ErrInvalidArgument)
	case hasProperty && h.Property != PropertyMessageID && h.Property != PropertyCorrelationID && h.Property != PropertyTimestamp:
		return HashOn{}, fmt.Errorf("%w: Unsupported property: %s", ErrInvalidArgument, h.Property)
	}
	return h, nil
}

// maxWeight bounds one consistent-hash binding's weight, so the sum of
// every binding's weight stays far from overflowing an int64. RabbitMQ has
// no bound, but makes one bucket per point: a weight in the billions would
// exhaust its memory long before this.
const maxWeight = 1 << 32

// parseWeight reads a consistent-hash binding key: a decimal integer of at
// least 1 (rabbit_exchange_type_consistent_hash:validate_binding; Erlang's
// list_to_integer takes a sign and leading zeros, as strconv does).
func parseWeight(key string) (int64, error) {
	w, err := strconv.ParseInt(key, 10, 64)
	switch {
	case err != nil || w > maxWeight:
		return 0, fmt.Errorf("%w: The binding key must be an integer: %q", ErrInvalidBinding, key)
	case w < 1:
		return 0, fmt.Errorf("%w: The binding key must be greater than 0", ErrInvalidBinding)
	}
	return w, nil
}

// ringEntry is one binding of a consistent-hash exchange and the buckets
// it holds: [end-weight, end).
type ringEntry struct {
	b   *binding
	end int64
}

// hashRing is RabbitMQ's consistent-hash state (chx_hash_ring, 3.8+): each
// binding holds as many consecutive buckets as its weight, in the order
// the bindings were added; a message goes to the bucket that jump
// consistent hashing picks for its hash among all buckets. Adding a
// binding appends buckets, so keys move only to the new binding; removing
// one shifts the later buckets down, as RabbitMQ's remove_binding does.
type hashRing struct {
	entries []ringEntry
}

func (r *hashRing) total() int64 {
	if len(r.entries) == 0 {
		return 0
	}
	return r.entries[len(r.entries)-1].end
}

func (r *hashRing) add(b *binding, weight int64) {
	r.entries = append(r.entries, ringEntry{b: b, end: r.total() + weight})
}

func (r *hashRing) remove(b *binding) {
	i := slices.IndexFunc(r.entries, func(e ringEntry) bool { return e.b == b })
	if i < 0 {
		return
	}
	start := int64(0)
	if i > 0 {
		start = r.entries[i-1].end
	}
	weight := r.entries[i].end - start
	r.entries = slices.Delete(r.entries, i, i+1)
	for j := i; j < len(r.entries); j++ {
		r.entries[j].end -= weight
	}
}

// pick returns the binding owning the bucket that h hashes to, or nil for
// an empty ring.
func (r *hashRing) pick(h uint64) *binding {
	n := r.total()
	if n == 0 {
		return nil
	}
	bucket := jumpHash(h, n)
	i, _ := slices.BinarySearchFunc(r.entries, bucket, func(e ringEntry, t int64) int {
		// The entry holding bucket is the first whose end is beyond it.
		if e.end <= t {
			return -1
		}
		return 1
	})
	return r.entries[i].b
}

// jumpHash is Lamping and Veach's jump consistent hash ("A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014), the algorithm RabbitMQ's
// consistent-hash exchange uses since 3.8 (it draws its random numbers
// from Erlang's exs1024 seeded with the key; this is the paper's
// generator, so the bucket a key gets differs from RabbitMQ's, but not
// how keys spread or move). It returns a bucket in [0, n).
func jumpHash(key uint64, n int64) int64 {
	var b, j int64 = -1, 0
	for j < n {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return b
}

// hashBytes is the key hash: 64-bit FNV-1a, then SplitMix64's finaliser,
// so that keys differing in their last bytes still differ in the high
// bits jumpHash draws from. It is fixed (no per-process seed), so a key
// maps to the same bucket across restarts.
func hashBytes(parts ...[]byte) uint64 {
	f := fnv.New64a()
	for _, p := range parts {
		_, _ = f.Write(p)
	}
	z := f.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// hashValue hashes what a consistent-hash exchange is configured to hash
// on. A message without the header or property hashes as an absent value,
// so every such message goes to the same binding, as RabbitMQ documents.
func hashValue(on HashOn, key string, m *Message) uint64 {
	switch {
	case on.Header != "":
		v, ok := m.Headers[on.Header]
		if !ok {
			return hashBytes([]byte{0})
		}
		switch v := v.(type) {
		case string:
			return hashBytes([]byte{'S'}, []byte(v))
		case []byte:
			return hashBytes([]byte{'S'}, v) // long string and byte array alike
		}
		var b strings.Builder
		if !encodeValue(&b, v, 0) {
			return hashBytes([]byte{1})
		}
		return hashBytes([]byte{'V'}, []byte(b.String()))
	case on.Property != "":
		var s string
		ok := true
		switch on.Property {
		case PropertyMessageID:
			s, ok = m.MessageID, m.MessageID != ""
		case PropertyCorrelationID:
			s, ok = m.CorrelationID, m.CorrelationID != ""
		case PropertyTimestamp:
			// RabbitMQ hashes the timestamp as its decimal text.
			s, ok = strconv.FormatInt(m.Timestamp, 10), m.HasTimestamp
		}
		if !ok {
			return hashBytes([]byte{0})
		}
		return hashBytes([]byte{'S'}, []byte(s))
	}
	return hashBytes([]byte{'S'}, []byte(key))
}

// modulusSlots is an x-modulus-hash exchange's bindings in RabbitMQ's
// order (rabbit_exchange_type_modulus_hash, 4.3: the destinations sorted,
// exchanges before queues, then by name); here ties between bindings to
// one destination are broken by key and arguments, so the order is total.
// Each binding is one slot whatever its key.
type modulusSlots struct {
	bindings []*binding
}

func (s *modulusSlots) add(b *binding) {
	i, _ := slices.BinarySearchFunc(s.bindings, b, compareDest)
	s.bindings = slices.Insert(s.bindings, i, b)
}

func (s *modulusSlots) remove(b *binding) {
	if i := slices.Index(s.bindings, b); i >= 0 {
		s.bindings = slices.Delete(s.bindings, i, i+1)
	}
}

func compareDest(a, b *binding) int {
	x, y := &a.id, &b.id
	if x.dest.exchange != y.dest.exchange {
		if x.dest.exchange {
			return -1
		}
		return 1
	}
	return cmp.Or(strings.Compare(x.dest.name, y.dest.name),
		strings.Compare(x.key, y.key), strings.Compare(x.args, y.args))
}

// pick returns the slot for a message with routing key key and the extra
// keys more: RabbitMQ hashes the list of all of a message's routing keys.
func (s *modulusSlots) pick(key string, more []string) *binding {
	if len(s.bindings) == 0 {
		return nil
	}
	h := hashKeys(key, more)
	return s.bindings[h%uint64(len(s.bindings))]
}

func hashKeys(key string, more []string) uint64 {
	if len(more) == 0 {
		return hashBytes([]byte{'S'}, []byte(key))
	}
	var buf []byte
	for _, k := range append([]string{key}, more...) {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
	}
	return hashBytes([]byte{'L'}, buf)
}

// routeHashed routes through a consistent-hash or modulus-hash exchange:
// at most one destination per message.
func (w *walk) routeHashed(x *exchange, key string, more []string, m *Message, dst []string, seen []*exchange) ([]string, []*exchange) {
	var b *binding
	if x.Kind == ConsistentHash {
		b = x.ring.pick(hashValue(x.HashOn, key, m))
	} else {
		b = x.modulus.pick(key, more)
	}
	if b == nil {
		return dst, seen
	}
	w.hits++
	if b.destX != nil {
		return dst, w.visit(seen, b.destX)
	}
	w.queueLists++
	return append(dst, b.Destination.Name), seen
}

// Exchange types that wrap another kind: their messages are routed by the
// kind ResolveType names, and the broker adds the wrapper's behaviour.
const (
	// TypeDelayed is rabbitmq-delayed-message-exchange's type: it routes
	// as its x-delayed-type argument names, once a message's x-delay has
	// passed.
	TypeDelayed = "x-delayed-message"
	// TypeDeduplication is rabbitmq-message-deduplication's exchange
	// type: a fanout exchange that drops messages seen before.
	TypeDeduplication = "x-message-deduplication"
	// TypeFederationUpstream is the internal exchange a downstream
	// broker's federation link declares on its upstream (RabbitMQ's
	// rabbit_federation_upstream_exchange): a fanout, declared with an
	// x-max-hops argument of type long. RabbitMQ's also drops, before they
	// travel, messages the downstream would refuse by hop count; Warren
	// routes it as a plain fanout and the downstream drops them, as it
	// does for an upstream without federation.
	TypeFederationUpstream = "x-federation-upstream"
)

// ResolveType returns the Kind an exchange declared with type typ and
// arguments args routes by: ParseKind's for the kinds routing knows,
// x-delayed-type's for TypeDelayed (which must be one of them; as the
// plugin's validate, anything else is ErrInvalidArgument, 406), Fanout for
// TypeDeduplication (the plugin routes as fanout) and
// TypeFederationUpstream (which must have x-max-hops). An unknown typ is
// ErrUnknownKind.
func ResolveType(typ string, args map[string]any) (Kind, error) {
	switch typ {
	case TypeDeduplication:
		return Fanout, nil
	case TypeFederationUpstream:
		// rabbit_federation_util:validate_arg(x-max-hops, long, Args).
		switch args["x-max-hops"].(type) {
		case int64:
			return Fanout, nil
		case nil:
			return 0, fmt.Errorf("%w: Argument x-max-hops missing", ErrInvalidArgument)
		}
		return 0, fmt.Errorf("%w: Argument x-max-hops must be of type long", ErrInvalidArgument)
	case TypeDelayed:
		s, ok := args["x-delayed-type"].(string)
		if !ok {
			return 0, fmt.Errorf("%w: Invalid argument, 'x-delayed-type' must be an existing exchange type", ErrInvalidArgument)
		}
		k, err := ParseKind(s)
		if err != nil {
			return 0, fmt.Errorf("%w: Invalid argument, 'x-delayed-type' must be an existing exchange type, not %q", ErrInvalidArgument, s)
		}
		return k, nil
	}
	return ParseKind(typ)
}
