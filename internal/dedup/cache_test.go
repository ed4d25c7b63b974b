package dedup

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

// caches returns a fresh cache of each kind; reopen gives the Pebble one
// back as a restart would (the memory one is returned as it is).
func caches(t *testing.T, c clock.Clock, size int64, ttl time.Duration) map[string]func(reopen bool) *Cache {
	dir := t.TempDir()
	db, err := pebblestore.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	mem := NewMemory(c, size, ttl)
	return map[string]func(bool) *Cache{
		"memory": func(bool) *Cache { return mem },
		"pebble": func(bool) *Cache {
			cache, err := OpenPebble(db, "/\x00x", c, size, ttl)
			require.NoError(t, err)
			return cache
		},
	}
}

func TestCache(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	for name, open := range caches(t, fc, 3, time.Second) {
		t.Run(name, func(t *testing.T) {
			c := open(false)
			seen := func(key string, ttl time.Duration) bool {
				s, err := c.Seen([]byte(key), ttl)
				require.NoError(t, err)
				return s
			}
			require.False(t, seen("a", 0))
			require.True(t, seen("a", 0))
			require.False(t, seen("b", 10*time.Second))
			fc.Advance(time.Second)
			require.False(t, seen("a", 0), "expired after the default ttl")
			require.True(t, seen("b", 0), "its own ttl is longer")
			require.False(t, seen("c", 0))
			require.EqualValues(t, 3, c.Len())
			require.False(t, seen("d", 0)) // evicts b, the oldest
			require.EqualValues(t, 3, c.Len())
			c = open(true)
			require.EqualValues(t, 3, c.Len())
			require.True(t, seen("d", 0))
			require.True(t, seen("a", 0))
			require.False(t, seen("b", 0), "evicted")
			require.NoError(t, c.Drop())
			require.Zero(t, c.Len())
			require.False(t, seen("d", 0))
		})
	}
}

// Two publishers of one key at once: exactly one gets through.
func TestCacheConcurrent(t *testing.T) {
	for name, open := range caches(t, clock.Real, 0, 0) {
		t.Run(name, func(t *testing.T) {
			c := open(false)
			var wg sync.WaitGroup
			var mu sync.Mutex
			through := map[string]int{}
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						key := fmt.Sprint(i)
						s, err := c.Seen([]byte(key), 0)
						if err != nil {
							t.Error(err)
							return
						}
						if !s {
							mu.Lock()
							through[key]++
							mu.Unlock()
						}
					}
					_ = g
				}()
			}
			wg.Wait()
			require.Len(t, through, 200)
			for k, n := range through {
				require.Equal(t, 1, n, "key %s let through %d times", k, n)
			}
		})
	}
}
