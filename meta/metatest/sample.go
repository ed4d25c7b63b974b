package metatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// The sample: one or more of every kind of entity a Store keeps, with
// names whose lengths differ (the key layout length-prefixes them), for
// the data directories a store's tests keep from earlier versions
// (WriteSample wrote them; CheckSample reads them back).
var (
	sampleVHosts = []meta.VHost{
		{Name: "/"},
		{Name: "prod", Description: "production", Tags: []string{"a", "b"}, DefaultQueueType: "quorum"},
	}
	sampleUsers = []meta.User{
		{Name: "guest", PasswordHash: "hash", HashingAlgorithm: sha256, Tags: meta.UserTags{"administrator"}},
		{Name: "ops", PasswordHash: "h512", HashingAlgorithm: sha512, Tags: meta.UserTags{"monitoring", "policymaker"}},
		{Name: "nopass", HashingAlgorithm: sha256},
	}
	samplePermissions = []meta.Permission{
		{User: "guest", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"},
		{User: "guest", VHost: "prod", Configure: "", Write: "^amq\\.", Read: "x"},
		{User: "ops", VHost: "/", Configure: "^c", Write: "^w", Read: "^r"},
	}
	sampleTopics = []meta.TopicPermission{
		{User: "guest", VHost: "/", Exchange: "amq.topic", Write: "^a", Read: ".*"},
		{User: "ops", VHost: "prod", Exchange: "t", Write: "", Read: "^{username}\\."},
	}
	sampleLimits = []meta.VHostLimit{
		{VHost: "/", Name: "max-connections", Value: 10},
		{VHost: "prod", Name: "max-queues", Value: -1},
	}
	samplePolicies = []meta.Policy{
		{VHost: "/", Name: "ha", Pattern: "^q", ApplyTo: "queues", Priority: 1,
			Definition: map[string]any{"max-length": json.Number("10"), "overflow": "reject-publish"}},
		{VHost: "prod", Name: "dlx", Pattern: ".*", ApplyTo: "all", Priority: 0,
			Definition: map[string]any{"dead-letter-exchange": "dlx", "federation-upstream-set": "all"}},
	}
	sampleOperatorPolicies = []meta.Policy{
		{VHost: "/", Name: "cap", Pattern: "", ApplyTo: "queues", Priority: 2,
			Definition: map[string]any{"max-length-bytes": json.Number("1048576")}},
	}
	sampleParameters = []meta.Parameter{
		{Component: "shovel", VHost: "/", Name: "move", Value: json.RawMessage(`{"src-uri":"amqp://","src-queue":"a"}`)},
		{Component: "federation-upstream", VHost: "prod", Name: "up", Value: json.RawMessage(`{"uri":"amqp://x"}`)},
	}
	sampleGlobals = []meta.GlobalParameter{
		{Name: "cluster_name", Value: json.RawMessage(`"warren"`)},
	}
	sampleExchanges = []meta.Exchange{
		{VHost: "/", Name: "logs", Type: "topic", Durable: true, Arguments: []byte{0, 0, 0, 0}},
		{VHost: "prod", Name: "internal", Type: "fanout", Durable: true, AutoDelete: true, Internal: true},
	}
	sampleQueues = []meta.Queue{
		{VHost: "/", Name: "jobs", Durable: true, Arguments: []byte{1, 2}},
		{VHost: "prod", Name: "q", Durable: true, Exclusive: true, AutoDelete: true, Owner: "conn#1"},
	}
	sampleBindings = []meta.Binding{
		{VHost: "/", Source: "logs", Destination: "jobs", DestinationKind: meta.DestinationQueue, RoutingKey: "#", Durable: true},
		{VHost: "/", Source: "logs", Destination: "amq.fanout", DestinationKind: meta.DestinationExchange,
			RoutingKey: "a.b", Arguments: []byte{7}, Durable: true},
	}
	// sampleCursor is the cursor of sampleQueues[0].
	sampleCursor uint64 = 42
)

// WriteSample writes the sample into s, and a queue, user and policy
// that it deletes again.
func WriteSample(ctx context.Context, s meta.Store) error {
	var errs []error
	do := func(err error) { errs = append(errs, err) }
	putAll(ctx, do, sampleVHosts, s.PutVHost)
	putAll(ctx, do, sampleUsers, s.PutUser)
	putAll(ctx, do, samplePermissions, s.PutPermission)
	putAll(ctx, do, sampleTopics, s.PutTopicPermission)
	putAll(ctx, do, sampleLimits, s.PutVHostLimit)
	putAll(ctx, do, samplePolicies, func(ctx context.Context, p meta.Policy) error { return s.PutPolicy(ctx, p, false) })
	putAll(ctx, do, sampleOperatorPolicies, func(ctx context.Context, p meta.Policy) error { return s.PutPolicy(ctx, p, true) })
	putAll(ctx, do, sampleParameters, s.PutParameter)
	putAll(ctx, do, sampleGlobals, s.PutGlobalParameter)
	putAll(ctx, do, sampleExchanges, s.PutExchange)
	putAll(ctx, do, sampleQueues, s.PutQueue)
	putAll(ctx, do, sampleBindings, s.PutBinding)
	_, err := s.CompareAndSwapOffset(ctx, sampleQueues[0].Key(), 0, sampleCursor)
	do(err)
	gone := meta.Queue{VHost: "/", Name: "gone", Durable: true}
	do(s.PutQueue(ctx, gone))
	_, err = s.CompareAndSwapOffset(ctx, gone.Key(), 0, 7)
	do(err)
	do(s.DeleteQueue(ctx, gone.VHost, gone.Name))
	do(s.PutUser(ctx, meta.User{Name: "gone"}))
	do(s.DeleteUser(ctx, "gone"))
	do(s.PutPolicy(ctx, meta.Policy{VHost: "/", Name: "gone", Pattern: ".*"}, false))
	do(s.DeletePolicy(ctx, "/", "gone", false))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// CheckSample checks that s holds what WriteSample wrote, no more.
func CheckSample(t *testing.T, s meta.Store) {
	t.Helper()
	ctx := context.Background()
	list := func(got any, err error) any {
		t.Helper()
		require.NoError(t, err)
		return got
	}
	require.ElementsMatch(t, sampleVHosts, list(s.ListVHosts(ctx)))
	require.ElementsMatch(t, sampleUsers, list(s.ListUsers(ctx)))
	require.ElementsMatch(t, samplePermissions, list(s.ListPermissions(ctx)))
	require.ElementsMatch(t, sampleTopics, list(s.ListTopicPermissions(ctx)))
	require.ElementsMatch(t, sampleLimits, list(s.ListVHostLimits(ctx)))
	for _, vh := range []string{"/", "prod"} {
		policyVHost := func(p meta.Policy) string { return p.VHost }
		require.ElementsMatch(t, inVHost(samplePolicies, vh, policyVHost), list(s.ListPolicies(ctx, vh, false)), "policies of %q", vh)
		require.ElementsMatch(t, inVHost(sampleOperatorPolicies, vh, policyVHost), list(s.ListPolicies(ctx, vh, true)), "operator policies of %q", vh)
		require.ElementsMatch(t, inVHost(sampleExchanges, vh, func(e meta.Exchange) string { return e.VHost }), list(s.ListExchanges(ctx, vh)), "exchanges of %q", vh)
		require.ElementsMatch(t, inVHost(sampleQueues, vh, func(q meta.Queue) string { return q.VHost }), list(s.ListQueues(ctx, vh)), "queues of %q", vh)
	}
	bindings, err := s.ListBindings(ctx, "/")
	require.NoError(t, err)
	require.Len(t, bindings, len(sampleBindings))
	for _, b := range sampleBindings {
		found := false
		for _, g := range bindings {
			found = found || equalBinding(b, g)
		}
		require.True(t, found, "binding %+v missing from %+v", b, bindings)
	}
	params, err := s.ListParameters(ctx, "", "")
	require.NoError(t, err)
	require.Len(t, params, len(sampleParameters))
	for i, p := range params {
		want := sampleParameters[len(sampleParameters)-1-i] // sorted by component
		require.Equal(t, want.Component+want.VHost+want.Name, p.Component+p.VHost+p.Name)
		require.JSONEq(t, string(want.Value), string(p.Value))
	}
	globals, err := s.ListGlobalParameters(ctx)
	require.NoError(t, err)
	require.Len(t, globals, 1)
	require.Equal(t, "cluster_name", globals[0].Name)
	require.JSONEq(t, `"warren"`, string(globals[0].Value))
	off, err := s.Offset(ctx, sampleQueues[0].Key())
	require.NoError(t, err)
	require.Equal(t, sampleCursor, off)
	off, err = s.Offset(ctx, meta.QueueKey{VHost: "/", Name: "gone"})
	require.NoError(t, err)
	require.Zero(t, off)
	_, err = s.GetUser(ctx, "gone")
	require.ErrorIs(t, err, meta.ErrNotFound)
}

// putAll puts every x of xs, telling do each error.
func putAll[T any](ctx context.Context, do func(error), xs []T, put func(context.Context, T) error) {
	for _, x := range xs {
		do(put(ctx, x))
	}
}

// inVHost returns the xs of vhost vh.
func inVHost[T any](xs []T, vh string, vhost func(T) string) []T {
	var out []T
	for _, x := range xs {
		if vhost(x) == vh {
			out = append(out, x)
		}
	}
	return out
}

// Records returns the metadata records of db (its 'm' keys, where
// meta/local and meta/raft's state machine keep them) in key order.
func Records(db *pebble.DB) (_ []meta.Record, err error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("m"), UpperBound: []byte("n")})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	var out []meta.Record
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		out = append(out, meta.Record{Key: bytes.Clone(it.Key()), Value: bytes.Clone(v)})
	}
	return out, it.Error()
}

// WriteRecords writes the metadata records of db (Records) to the file
// path, as SampleRecords reads them.
func WriteRecords(path string, db *pebble.DB) error {
	recs, err := Records(db)
	if err != nil {
		return err
	}
	var out []byte
	for _, r := range recs {
		out = fmt.Appendf(out, "%q\t%q\n", r.Key, r.Value)
	}
	return os.WriteFile(path, out, 0o644)
}

// SampleRecords reads a records file a sample generator wrote
// (WriteRecords: one record a line, its key and value quoted as Go
// quotes them, a tab between): the metadata records a store kept for the
// sample.
func SampleRecords(t *testing.T, path string) []meta.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []meta.Record
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		require.True(t, ok, "%s: line %q has no tab", path, line)
		key, err := strconv.Unquote(k)
		require.NoError(t, err, "%s: key %s", path, k)
		val, err := strconv.Unquote(v)
		require.NoError(t, err, "%s: value %s", path, v)
		out = append(out, meta.Record{Key: []byte(key), Value: []byte(val)})
	}
	return out
}
