package raft

import (
	"encoding/binary"
	"fmt"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/unacked"
)

// State machine key layout. The first byte says what a key holds; strings
// inside keys are length-prefixed where another field follows, so one name
// is never a prefix of another and every listing is one prefix scan. The
// 'm' keys are meta/internal/metakey's, the layout meta/local uses too.
//
//	! a                                  applied index (8 bytes) — not in snapshots
//	! c                                  ConfState at the applied index (protobuf)
//	! p id(8)                            cluster member (JSON Peer)
//	m v name                             vhost      (JSON meta.VHost)
//	m u name                             user       (JSON meta.User)
//	m p lp(user) vhost                   permission (JSON meta.Permission)
//	m e lp(vhost) name                   exchange   (JSON meta.Exchange)
//	m q lp(vhost) name                   queue      (JSON meta.Queue)
//	m c lp(vhost) name                   cursor     (8 bytes, big-endian)
//	m l lp(vhost) name                   vhost limit (JSON meta.VHostLimit)
//	m t lp(user) lp(vhost) exchange      topic permission (JSON meta.TopicPermission)
//	m b lp(vhost) lp(source) lp(kind) lp(destination) lp(routing key) arguments
//	                                     binding    (JSON meta.Binding)
//	m y lp(vhost) name                   policy     (JSON meta.Policy)
//	m o lp(vhost) name                   operator policy (JSON meta.Policy)
//	s lp(shard) n                        next offset of the shard (8 bytes)
//	s lp(shard) c                        live record count (8 bytes)
//	s lp(shard) r offset(8)              record (internal/codec)
//	u lp(vhost) lp(queue) offset(8)      unacked entry (internal/codec)
//	r key                                the broker's records (meta.Records, records.go)
//
// Big-endian offsets keep records and entries in offset order.
var (
	keyApplied   = []byte("!a")
	keyConfState = []byte("!c")
	prefixPeer   = []byte("!p")
)

func peerKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefixPeer...), id)
}

func shardPrefix(shard string) []byte { return appendLPString([]byte{'s'}, shard) }

func shardNextKey(shard string) []byte  { return append(shardPrefix(shard), 'n') }
func shardCountKey(shard string) []byte { return append(shardPrefix(shard), 'c') }
func shardRecPrefix(shard string) []byte {
	return append(shardPrefix(shard), 'r')
}

func recordKey(recPrefix []byte, offset uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), recPrefix...), offset)
}

// unackedQueuePrefix, unackedKey and parseUnackedKey are internal/codec's
// entry keys, the ones storage/pebble's Index uses on a single node.
func unackedQueuePrefix(vhost, queue string) []byte {
	return codec.AppendQueuePrefix(nil, vhost, queue)
}

func unackedKey(k unacked.Key) []byte { return codec.AppendEntryKey(nil, k) }

// parseUnackedKey is unackedKey's inverse.
func parseUnackedKey(key []byte) (unacked.Key, error) {
	k, err := codec.DecodeEntryKey(key)
	if err != nil {
		return unacked.Key{}, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return k, nil
}
