package meta_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// TestPermissionRecordsReadEitherWay: the meta stores keep permissions and
// topic permissions as JSON. Records written before the types took the
// definitions file's field names ({"User": ...}) read the same as those
// written after ({"user": ...}), so a data directory or raft log from
// before is read unchanged.
func TestPermissionRecordsReadEitherWay(t *testing.T) {
	want := meta.Permission{User: "u", VHost: "/", Configure: "c", Write: "w", Read: "r"}
	for _, raw := range []string{
		`{"User":"u","VHost":"/","Configure":"c","Write":"w","Read":"r"}`,
		`{"user":"u","vhost":"/","configure":"c","write":"w","read":"r"}`,
	} {
		var got meta.Permission
		require.NoError(t, json.Unmarshal([]byte(raw), &got))
		require.Equal(t, want, got, raw)
	}
	wantTopic := meta.TopicPermission{User: "u", VHost: "/", Exchange: "x", Write: "w", Read: "r"}
	for _, raw := range []string{
		`{"User":"u","VHost":"/","Exchange":"x","Write":"w","Read":"r"}`,
		`{"user":"u","vhost":"/","exchange":"x","write":"w","read":"r"}`,
	} {
		var got meta.TopicPermission
		require.NoError(t, json.Unmarshal([]byte(raw), &got))
		require.Equal(t, wantTopic, got, raw)
	}
	out, err := json.Marshal(want)
	require.NoError(t, err)
	require.JSONEq(t, `{"user":"u","vhost":"/","configure":"c","write":"w","read":"r"}`, string(out), "the definitions file's shape")
}
