package metatest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/capability"
	"github.com/warrenmq/broker/meta"
)

// Option changes what Run checks.
type Option func(*config)

type config struct{ without []string }

// Without says the store does not offer the named optional interfaces
// (names from meta.Capabilities, such as "meta.Syncer"). Run checks every
// capability by default: a store that lacks one not named here fails, and
// so does one that implements a capability named here, so the list says
// exactly what the store offers.
func Without(names ...string) Option {
	return func(c *config) { c.without = append(c.without, names...) }
}

// testCapabilities checks s's optional interfaces against what the test
// declared, then exercises each one s offers.
func testCapabilities(t *testing.T, s meta.Store, c config) {
	for _, p := range capability.Declared(meta.Capabilities, s, c.without, "metatest", "meta.Wrap") {
		t.Errorf("metatest: %s", p)
	}
	ctx := context.Background()
	if sy, ok := s.(meta.Syncer); ok {
		t.Run("Syncer", func(t *testing.T) {
			require.NoError(t, s.PutQueue(meta.DeferSync(ctx), meta.Queue{VHost: "/", Name: "deferred", Durable: true}))
			require.NoError(t, sy.Sync(ctx))
			_, err := s.GetQueue(ctx, "/", "deferred")
			require.NoError(t, err)
		})
	}
	if rs, ok := s.(meta.Records); ok {
		t.Run("Records", func(t *testing.T) {
			k := []byte("metatest/k")
			ok, err := rs.UpdateRecords(ctx, meta.RecordUpdate{Match: []meta.Record{{Key: k}}, Set: []meta.Record{{Key: k, Value: []byte("v1")}}})
			require.NoError(t, err)
			require.True(t, ok, "absent key matched nil")
			ok, err = rs.UpdateRecords(ctx, meta.RecordUpdate{Match: []meta.Record{{Key: k, Value: []byte("other")}}, Set: []meta.Record{{Key: k, Value: []byte("v2")}}})
			require.NoError(t, err)
			require.False(t, ok, "a failed condition writes nothing")
			var got [][2]string
			require.NoError(t, rs.ScanRecords([]byte("metatest/"), nil, func(k, v []byte) bool {
				got = append(got, [2]string{string(k), string(v)})
				return true
			}))
			require.Equal(t, [][2]string{{"metatest/k", "v1"}}, got)
		})
	}
	if cf, ok := s.(meta.ChangeFeed); ok {
		t.Run("ChangeFeed", func(t *testing.T) {
			// A topology write is told as ChangeTopology of its vhost, and
			// after cancel returns fn is not called again.
			var mu sync.Mutex
			calls, stopped := 0, false
			seen := make(chan struct{}, 1)
			cancel := cf.Watch(func(c meta.Change) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if stopped {
					t.Errorf("metatest: Watch called fn after cancel returned: %+v", c)
				}
				if c.Kind == meta.ChangeTopology && c.VHost == "watched" {
					select {
					case seen <- struct{}{}:
					default:
					}
				}
			})
			require.NoError(t, s.PutExchange(ctx, meta.Exchange{VHost: "watched", Name: "x", Type: "direct", Durable: true}))
			select {
			case <-seen:
			case <-time.After(10 * time.Second):
				t.Fatal("metatest: no ChangeTopology for vhost \"watched\" within 10s of PutExchange")
			}
			cancel()
			mu.Lock()
			stopped = true
			mu.Unlock()
			require.NoError(t, s.PutExchange(ctx, meta.Exchange{VHost: "watched", Name: "y", Type: "direct", Durable: true}))
		})
	}
	if rp, ok := s.(meta.Replicated); ok {
		t.Run("Replicated", func(t *testing.T) {
			st := rp.ReplicationStatus()
			require.Contains(t, []string{"leader", "follower", "candidate", "pre-candidate"}, st.Role)
			require.NotZero(t, st.ID)
			// Every queue listed with a group of its own is found alone.
			for _, qr := range rp.QueueReplications(context.Background(), "") {
				one, ok := rp.QueueReplication(context.Background(), qr.Queue)
				require.True(t, ok, "QueueReplication(%v) after QueueReplications listed it", qr.Queue)
				require.Equal(t, qr.Queue, one.Queue)
			}
		})
	}
}
