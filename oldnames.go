package broker

import (
	"bytes"
	"context"
	"hash"
	"net"
	"time"

	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
)

// The old names below are what management.go, definitions.go and
// mgmt_access.go (and their tests) still call while those files are in the
// root. They forward to where the code now lives; delete this file when
// those files move to internal/mgmt and the definitions package and call
// the new homes directly, with the oldNames line in accountState
// (accounts.go), the b.acct.throttle line in New (broker.go) and
// oldnames_test.go:
//
//	password hashes  internal/passwd: Hash, Check, Import, Export, Encode
//	login guard      Broker.passwordLogin (HTTP basic auth), internal/login
//	introspection    sortedConns, sortedVHosts, queueStatsOf (introspect.go)
//	metrics          internal/metrics (BenchmarkMetricsScrape's writeMetrics
//	                 is internal/metrics' BenchmarkScrape)

// oldNames is embedded in accountState for management.go's
// b.acct.throttle.
type oldNames struct{ throttle oldThrottle }

type oldThrottle struct{ t *login.Throttle }

func (o oldThrottle) admit(src string) time.Duration { return o.t.Admit(src) }
func (o oldThrottle) failed(src string)              { o.t.Failed(src) }

func throttleKey(a net.Addr) string { return login.SourceKey(a) }

func (b *Broker) throttleWait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-b.quit:
		return false
	}
}

func (b *Broker) lookupUser(ctx context.Context, name string) (meta.User, error) {
	return b.acct.logins.Lookup(ctx, name)
}

func unavailable(err error) bool { return login.Unavailable(err) }

func hashPassword(password string) []byte               { return passwd.Hash(password) }
func checkPassword(stored []byte, password string) bool { return passwd.Check(stored, password) }
func storedHash(alg, hash string) ([]byte, error)       { return passwd.Import(alg, hash) }
func encodeHash(h hash.Hash, salt []byte, password string) []byte {
	return passwd.Encode(h, salt, password)
}

type oldHashing struct{ name string }

func splitStoredHash(stored []byte) (oldHashing, []byte) {
	alg, b64 := passwd.Export(stored)
	return oldHashing{alg}, []byte(b64)
}

func (b *Broker) writeMetrics(buf *bytes.Buffer, perObject bool) {
	s := metricsSource{b}.Snapshot(context.Background())
	metrics.Write(buf, &s, perObject)
}

func (b *Broker) opsConnections() []*session.Conn { return b.sortedConns() }
func (b *Broker) opsVHosts() []*vhost.VHost       { return b.sortedVHosts() }
func opsQueueStats(ctx context.Context, q *vhost.Queue) (QueueStats, bool) {
	return queueStatsOf(ctx, q)
}
