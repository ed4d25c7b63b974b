package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/examples/ledger"
)

// events is the experiment's stream: 3,000 order events, three of them
// poison.
const events = 3000

// strikeAt is how many confirmed publishes pass before a scenario's
// fault strikes: mid-stream.
const strikeAt = 1000

// scenario is one fault, struck once strikeAt events were confirmed.
type scenario struct {
	name string
	// strike makes the fault happen; it runs on the publisher's goroutine.
	strike func(t *testing.T, r *rig)
	// afterCommit, if set, is the consumer's AfterCommit hook.
	afterCommit func(r *rig) func(id string) error
	// check adds the scenario's own assertions.
	check func(t *testing.T, r *rig)
}

// rig is one run: the Lab, a Link each for the publisher and the
// consumer, the database, and the two programs.
type rig struct {
	lab            *brokertest.Lab
	pubNet, conNet *brokertest.Link
	pg             *postgres
	db             *pgxpool.Pool

	mu        sync.Mutex
	consumers []*ledger.Consumer
	stop      []context.CancelFunc
	wg        sync.WaitGroup
	pub       *ledger.Publisher
}

func TestLedger(t *testing.T) {
	pg := startPostgres(t)
	scenarios := []scenario{
		{name: "no fault"},
		{
			// kill -9 of the broker mid-stream: confirmed events survive,
			// the publisher sends the unconfirmed ones again.
			name:   "crash broker mid-stream",
			strike: func(t *testing.T, r *rig) { require.NoError(t, r.lab.Crash()) },
			check: func(t *testing.T, r *rig) {
				require.Positive(t, r.pub.Stats().Resent, "the publisher sent the unconfirmed events again")
			},
		},
		{
			// The consumer dies after its commit, before its ack: the
			// event comes back redelivered and the dedup table stops it.
			name: "kill consumer between commit and ack",
			afterCommit: func(r *rig) func(string) error {
				var killed atomic.Bool
				return func(id string) error {
					if id == "evt-000500" && killed.CompareAndSwap(false, true) {
						r.conNet.Cut()
						return ledger.ErrKilled
					}
					return nil
				}
			},
			check: func(t *testing.T, r *rig) {
				require.GreaterOrEqual(t, r.consumerStats().Deduplicated, int64(1), "the event applied before the kill came back and was deduplicated")
			},
		},
		{
			// As RabbitMQ's management API closes a connection.
			name: "drop consumer connection",
			strike: func(t *testing.T, r *rig) {
				n, err := r.lab.CloseConnections("ledger-consumer", brokertest.ConnectionForced, brokertest.ManagementCloseReason)
				require.NoError(t, err)
				require.Equal(t, 1, n)
			},
		},
		{
			// The consumer's network goes silent: the heartbeats notice on
			// both sides, the broker returns what the consumer held, and
			// the consumer reconnects once the network is back.
			name: "stall consumer network",
			strike: func(t *testing.T, r *rig) {
				r.conNet.BlackHole()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := r.lab.WaitQueue(ctx, ledger.WorkQueue, brokertest.Consumers(0))
				require.NoError(t, err, "the broker dropped the silent consumer")
				r.conNet.Heal()
			},
		},
		{
			// Everything restarts: the broker (gracefully), the consumer
			// (a new process) and PostgreSQL.
			name: "restart everything",
			strike: func(t *testing.T, r *rig) {
				r.killConsumers()
				require.NoError(t, r.lab.Restart())
				require.NoError(t, r.pg.ctl("restart", "-m", "fast"))
				r.startConsumer(t, nil)
			},
		},
	}
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			runScenario(t, pg, fmt.Sprintf("ledger_%d", i), sc)
		})
	}
}

func runScenario(t *testing.T, pg *postgres, dbName string, sc scenario) {
	db := pg.database(t, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := db.Exec(ctx, ledger.Schema)
	require.NoError(t, err)

	// The broker proposes a 1 s heartbeat, so a silent peer is noticed
	// in about 2 s either way.
	lab := brokertest.NewLab(t, broker.Options{Heartbeat: time.Second})
	r := &rig{lab: lab, pubNet: lab.NewLink("publisher"), conNet: lab.NewLink("consumer"), pg: pg}
	defer r.killConsumers()

	var hook func(string) error
	if sc.afterCommit != nil {
		hook = sc.afterCommit(r)
	}
	r.db = db
	r.startConsumer(t, hook)

	evs, sum := ledger.Events(events, ledger.Poison...)
	var struck sync.WaitGroup
	r.pub = &ledger.Publisher{
		Dial:   dialer(r.pubNet, "ledger-publisher", 0),
		Window: 100,
		OnConfirmed: func(n int64) {
			if n == strikeAt && sc.strike != nil {
				struck.Add(1)
				defer struck.Done()
				sc.strike(t, r)
			}
		},
	}
	require.NoError(t, r.pub.Run(ctx, evs))
	struck.Wait()

	// Every confirmed event ends applied once, or parked.
	want := int64(events - len(ledger.Poison))
	waitCtx, waitCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer waitCancel()
	for {
		rows, _, _, err := ledger.Totals(waitCtx, db)
		if err == nil && rows == want {
			break
		}
		select {
		case <-waitCtx.Done():
			t.Fatalf("ledger has %d rows, want %d (err %v)", rows, want, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	_, err = lab.WaitQueue(waitCtx, ledger.Parking, brokertest.Ready(uint64(len(ledger.Poison))))
	require.NoError(t, err)
	_, err = lab.WaitQueue(waitCtx, ledger.WorkQueue, func(s brokertest.QueueState) bool { return s.Ready == 0 && s.Unacked == 0 })
	require.NoError(t, err)

	rows, balance, processed, err := ledger.Totals(ctx, db)
	require.NoError(t, err)
	require.Equal(t, want, rows, "every good event applied once")
	require.Equal(t, want, processed)
	require.Equal(t, sum, balance, "the balance is exactly the sum of the good events: nothing applied twice, nothing lost")
	require.Equal(t, ledger.Poison, parked(t, lab), "the three poison events are quarantined")

	cs := r.consumerStats()
	ps := r.pub.Stats()
	require.LessOrEqual(t, cs.MaxUnacked, int64(ledger.Prefetch), "unacked never above the prefetch")
	require.Equal(t, int64(events), ps.Confirmed)
	if sc.check != nil {
		sc.check(t, r)
	}
	t.Logf("| %s | %d | %d | %d | %d | %d | %d | %d | %d |", sc.name, ps.Published, ps.Confirmed, ps.Resent,
		cs.Delivered, cs.Redelivered, cs.Applied, cs.Deduplicated, len(ledger.Poison))
}

// dialer connects through link with a connection name and, when
// heartbeat is set, that heartbeat.
func dialer(link *brokertest.Link, name string, heartbeat time.Duration) ledger.Dialer {
	return func() (*amqp091.Connection, error) {
		cfg := amqp091.Config{Dial: link.Dial, Properties: amqp091.Table{}, Heartbeat: heartbeat}
		cfg.Properties.SetClientConnectionName(name)
		return amqp091.DialConfig("amqp://guest:guest@127.0.0.1/", cfg)
	}
}

// startConsumer starts a consumer process.
func (r *rig) startConsumer(t *testing.T, hook func(string) error) {
	c := &ledger.Consumer{Dial: dialer(r.conNet, "ledger-consumer", time.Second), DB: r.db, AfterCommit: hook}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.consumers = append(r.consumers, c)
	r.stop = append(r.stop, cancel)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = c.Run(ctx)
	}()
}

// killConsumers stops every consumer process: their connections are cut
// (no ack, no close) and their goroutines end.
func (r *rig) killConsumers() {
	r.conNet.Cut()
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	for _, c := range stop {
		c()
	}
	r.wg.Wait()
}

// consumerStats adds up the stats of every consumer process of the run.
func (r *rig) consumerStats() ledger.ConsumerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sum ledger.ConsumerStats
	for _, c := range r.consumers {
		s := c.Stats()
		sum.Delivered += s.Delivered
		sum.Redelivered += s.Redelivered
		sum.Applied += s.Applied
		sum.Deduplicated += s.Deduplicated
		sum.PoisonNacked += s.PoisonNacked
		sum.Reconnects += s.Reconnects
		sum.MaxUnacked = max(sum.MaxUnacked, s.MaxUnacked)
	}
	return sum
}

// parked reads the message ids in the parking queue (without taking
// them) and checks each was dead-lettered by the delivery limit.
func parked(t *testing.T, lab *brokertest.Lab) []string {
	msgs, err := lab.Broker().PeekQueue(context.Background(), "/", ledger.Parking, 100)
	require.NoError(t, err)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Publishing.MessageId)
		deaths, _ := m.Publishing.Headers["x-death"].([]any)
		require.NotEmpty(t, deaths, "x-death on %s", m.Publishing.MessageId)
		d := deaths[0].(amqp091.Table)
		require.Equal(t, "delivery_limit", d["reason"], "dead-lettered by the delivery limit")
	}
	slices.Sort(ids)
	return ids
}
