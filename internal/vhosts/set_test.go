package vhosts

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
)

// store is a memory meta store that counts the vhosts it is asked to
// store and can fail the listing.
type store struct {
	*metamemory.Store
	puts    []string
	listErr error
}

func (s *store) PutVHost(ctx context.Context, v meta.VHost) error {
	s.puts = append(s.puts, v.Name)
	return s.Store.PutVHost(ctx, v)
}

func (s *store) ListVHosts(ctx context.Context) ([]meta.VHost, error) {
	if s.listErr != nil {
		return nil, s.listErr
	}
	return s.Store.ListVHosts(ctx)
}

// newSet is a Set over a fresh store whose Open opens real vhosts on it,
// refusing the names in fail, and records what it opened.
func newSet(t *testing.T, fail ...string) (*Set, *store, *[]string) {
	t.Helper()
	st := &store{Store: metamemory.New()}
	var opened []string
	s := &Set{Store: st, Log: slog.New(slog.DiscardHandler)}
	s.Open = func(ctx context.Context, rec meta.VHost) (*vhost.VHost, error) {
		if slices.Contains(fail, rec.Name) {
			return nil, errors.New("cannot open " + rec.Name)
		}
		vh, err := vhost.Open(ctx, vhost.Config{Name: rec.Name, Store: st.Store})
		if err != nil {
			return nil, err
		}
		vh.SetDefaultQueueType(rec.DefaultQueueType)
		opened = append(opened, rec.Name)
		return vh, nil
	}
	t.Cleanup(s.Close)
	return s, st, &opened
}

func storedNames(t *testing.T, st *store) []string {
	t.Helper()
	vs, err := st.Store.ListVHosts(context.Background())
	require.NoError(t, err)
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}

// TestOpenAll: the configured vhosts and the stored ones open once each,
// by canonical name ("" is "/"), each stored with its stored settings;
// a listing that fails or a vhost that cannot open is an error.
func TestOpenAll(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured []string
		stored     []meta.VHost
		fail       []string
		listErr    error
		open       []string // sorted; nil when OpenAll fails
		defaults   map[string]string
	}{
		{"configured only", []string{"", "a"}, nil, nil, nil, []string{"/", "a"}, nil},
		{"\"\" and / are one", []string{"", "/"}, nil, nil, nil, []string{"/"}, nil},
		{"stored too, with their settings", []string{"/"}, []meta.VHost{{Name: "b", DefaultQueueType: "quorum"}, {Name: "/", DefaultQueueType: "stream"}}, nil, nil, []string{"/", "b"}, map[string]string{"/": "stream", "b": "quorum"}},
		{"a vhost that cannot open", []string{"/", "bad"}, nil, []string{"bad"}, nil, nil, nil},
		{"the store cannot list", []string{"/"}, nil, nil, errors.New("no leader"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, st, opened := newSet(t, tc.fail...)
			for _, v := range tc.stored {
				require.NoError(t, st.Store.PutVHost(context.Background(), v))
			}
			st.listErr = tc.listErr
			err := s.OpenAll(context.Background(), tc.configured)
			if tc.open == nil {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.open, s.Names())
			got := slices.Clone(*opened)
			slices.Sort(got)
			require.Equal(t, tc.open, got, "each opened once")
			require.Equal(t, tc.open, storedNames(t, st), "each stored")
			for name, want := range tc.defaults {
				vh, ok := s.Lookup(name)
				require.True(t, ok)
				require.Equal(t, want, vh.DefaultQueueType())
			}
			_, ok := s.Lookup("")
			require.True(t, ok, `"" finds "/"`)
		})
	}
}

// TestPutRemove: Put opens and stores a new vhost (created), and stores a
// known one and gives it its new default queue type without opening it
// again; Remove takes one off the set.
func TestPutRemove(t *testing.T) {
	s, st, opened := newSet(t)
	ctx := context.Background()
	require.NoError(t, s.OpenAll(ctx, []string{"/"}))
	created, err := s.Put(ctx, meta.VHost{Name: "a", DefaultQueueType: "quorum"})
	require.NoError(t, err)
	require.True(t, created)
	created, err = s.Put(ctx, meta.VHost{Name: "a", DefaultQueueType: "stream", Description: "logs"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, []string{"/", "a"}, *opened, "opened once")
	vh, ok := s.Lookup("a")
	require.True(t, ok)
	require.Equal(t, "stream", vh.DefaultQueueType())
	rec, err := st.Store.GetVHost(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "logs", rec.Description, "the new settings stored")

	got, done, ok := s.Remove("a")
	require.True(t, ok)
	require.Same(t, vh, got)
	defer done()
	_, ok = s.Lookup("a")
	require.False(t, ok)
	_, _, ok = s.Remove("a")
	require.False(t, ok, "removed once")
	got.Close()
}

// TestSync: Sync opens the vhosts another broker stored without storing
// them again, takes off and returns the open ones the store no longer
// lists, and does not open again one being removed here until its
// removal is done; a vhost that cannot open is reported, not fatal.
func TestSync(t *testing.T) {
	s, st, _ := newSet(t, "broken")
	ctx := context.Background()
	require.NoError(t, s.OpenAll(ctx, []string{"/", "old", "leaving"}))
	st.puts = nil

	_, done, ok := s.Remove("leaving")
	require.True(t, ok)
	gone, ok := s.Sync(ctx, []meta.VHost{{Name: "/"}, {Name: "new", DefaultQueueType: "quorum"}, {Name: "leaving"}})
	require.True(t, ok)
	require.Equal(t, []string{"/", "new"}, s.Names(), "the new one opened, the one being removed not")
	require.Empty(t, st.puts, "what another broker stored is not stored again")
	require.Len(t, gone, 1)
	require.Equal(t, "old", gone[0].Name())
	gone[0].Close()
	vh, _ := s.Lookup("new")
	require.Equal(t, "quorum", vh.DefaultQueueType())

	done()
	_, ok = s.Sync(ctx, []meta.VHost{{Name: "/"}, {Name: "new"}, {Name: "leaving"}})
	require.True(t, ok)
	require.Equal(t, []string{"/", "leaving", "new"}, s.Names(), "opened again once its removal is done")

	_, ok = s.Sync(ctx, []meta.VHost{{Name: "/"}, {Name: "new"}, {Name: "leaving"}, {Name: "broken"}})
	require.False(t, ok, "a vhost that cannot open is reported")
	require.Equal(t, []string{"/", "leaving", "new"}, s.Names())
}
