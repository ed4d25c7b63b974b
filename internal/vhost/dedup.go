package vhost

import (
	"math"
	"strconv"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/dedup"
)

// DedupOpener opens the deduplication cache of an x-message-deduplication
// exchange (on disk for a durable exchange when the broker has a data
// directory, else in memory): size entries at most, ttl the default
// expiry (0: never).
type DedupOpener func(vhost, exchange string, durable bool, size int64, ttl time.Duration) (*dedup.Cache, error)

// dedupArgs are an x-message-deduplication exchange's arguments.
type dedupArgs struct {
	size int64
	ttl  time.Duration
}

// parseDedupArgs validates the arguments as the plugin's validate does
// (rabbitmq-message-deduplication 0.6): x-cache-size required, an integer
// (or a decimal long string) above 0; x-cache-ttl likewise when present,
// in milliseconds; x-cache-persistence "disk" or "memory" when present.
// Errors are 406 with the plugin's texts. Unlike the plugin, an
// x-cache-size above dedup.MaxSize is refused too, with a text that names
// the maximum.
func parseDedupArgs(args amqp.Table) (dedupArgs, error) {
	var a dedupArgs
	size, ok := positiveArg(args["x-cache-size"])
	if !ok {
		return a, amqp.NewError(amqp.PreconditionFailed, 0, 0, "Missing or invalid argument, 'x-cache-size' must be an integer greater than 0")
	}
	if size > dedup.MaxSize {
		return a, amqp.NewError(amqp.PreconditionFailed, 0, 0, "Invalid argument, 'x-cache-size' must be at most %d, was %d", dedup.MaxSize, size)
	}
	a.size = size
	if v, present := args["x-cache-ttl"]; present {
		ttl, ok := positiveArg(v)
		if !ok || ttl > math.MaxInt64/int64(time.Millisecond) {
			return a, amqp.NewError(amqp.PreconditionFailed, 0, 0, "Invalid argument, 'x-cache-ttl' must be an integer greater than 0")
		}
		a.ttl = time.Duration(ttl) * time.Millisecond
	}
	if v, present := args["x-cache-persistence"]; present && v != "disk" && v != "memory" {
		return a, amqp.NewError(amqp.PreconditionFailed, 0, 0, "Invalid argument, 'x-cache-persistence' must be either 'disk' or 'memory'")
	}
	return a, nil
}

// positiveArg reads an integer argument above 0, or a decimal string of
// one.
func positiveArg(v any) (int64, bool) {
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil && n > 0
	}
	switch n := v.(type) {
	case int8, int16, int32, int64, int, uint8, uint16, uint32:
		i, _ := dedup.Int(n)
		return i, i > 0
	case uint64:
		return int64(n), n > 0 && n <= math.MaxInt64
	}
	return 0, false
}

// messageTTL reads a message's x-cache-ttl header: an integer above 0, in
// milliseconds; anything else means the exchange's default.
func messageTTL(headers map[string]any) time.Duration {
	if n, ok := dedup.Int(headers["x-cache-ttl"]); ok && n > 0 && n <= math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(n) * time.Millisecond
	}
	return 0
}

// deduplicate checks a publish to a deduplicating exchange against its
// cache. A cache that fails to answer lets the message through (it is
// routed; the failure is logged): losing a message is worse than a
// duplicate.
func (v *VHost) deduplicate(x *exchange, props []byte) Verdict {
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return Route
	}
	key, ok := dedup.Key(p.Headers)
	if !ok {
		return Route
	}
	seen, err := x.dedup.Seen(key, messageTTL(p.Headers))
	if err != nil {
		v.cfg.Logger.Error("deduplication cache", "vhost", v.cfg.Name, "exchange", x.def.Name, "err", err)
		return Route
	}
	if seen {
		return Duplicate
	}
	return Route
}

// openDedupLocked opens the cache of a deduplicating exchange being added.
func (v *VHost) openDedupLocked(name string, durable bool, args amqp.Table) (*dedup.Cache, error) {
	a, err := parseDedupArgs(args)
	if err != nil {
		// Stored by an older Warren with other rules: keep the exchange,
		// with a cache of RabbitMQ's default-less minimum.
		a = dedupArgs{size: 1}
		if s, ok := positiveArg(args["x-cache-size"]); ok {
			a.size = min(s, dedup.MaxSize)
		}
	}
	if v.cfg.Dedup == nil {
		return dedup.NewMemory(clock.Real, a.size, a.ttl), nil
	}
	return v.cfg.Dedup(v.cfg.Name, name, durable, a.size, a.ttl)
}

// deadLetterDuplicate reports whether a message dead-lettered to exchange
// is a duplicate its deduplication cache drops (recording its key when it
// is not), as the plugin's exchange, which dead-lettering routes through,
// does. Any other exchange: false.
func (v *VHost) deadLetterDuplicate(exchange string, props []byte) bool {
	v.mu.RLock()
	x, ok := v.exchanges[exchange]
	v.mu.RUnlock()
	return ok && x.dedup != nil && v.deduplicate(x, props) == Duplicate
}
