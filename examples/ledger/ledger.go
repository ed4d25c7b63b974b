package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The topology, as in the experiment the example reproduces: a direct
// exchange routes events to the durable work queue; its delivery limit
// dead-letters an event delivered DeliveryLimit+1 times to the parking
// queue through the default exchange.
const (
	Exchange   = "orders.x"
	WorkQueue  = "orders.work"
	Parking    = "orders.parking"
	RoutingKey = "order"
	// DeliveryLimit is the work queue's x-delivery-limit: an event is
	// tried DeliveryLimit+1 = 3 times, then quarantined.
	DeliveryLimit = 2
	// Prefetch bounds each consumer's unacked deliveries.
	Prefetch = 10
)

// Event is one order event. A nil AmountCents is poison: the consumer
// cannot apply it.
type Event struct {
	ID          string `json:"id"`
	AmountCents *int64 `json:"amount_cents"`
}

// Declare declares the topology on ch (idempotent).
func Declare(ch *amqp091.Channel) error {
	if err := ch.ExchangeDeclare(Exchange, "direct", true, false, false, false, nil); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(Parking, true, false, false, false, nil); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(WorkQueue, true, false, false, false, amqp091.Table{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int32(DeliveryLimit),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": Parking,
	}); err != nil {
		return err
	}
	return ch.QueueBind(WorkQueue, RoutingKey, Exchange, false, nil)
}

// Schema creates the consumer's tables: the dedup table, the ledger and
// the one balance row.
const Schema = `
create table if not exists processed (message_id text primary key);
create table if not exists ledger (message_id text primary key, amount_cents bigint not null);
create table if not exists balance (id int primary key, cents bigint not null);
insert into balance (id, cents) values (1, 0) on conflict do nothing;
`

// Dialer opens a connection to the broker (a Lab Link's door, in the
// tests); it is called again after every connection loss.
type Dialer func() (*amqp091.Connection, error)

// redial dials until it succeeds or ctx ends.
func redial(ctx context.Context, dial Dialer) (*amqp091.Connection, error) {
	backoff := 5 * time.Millisecond
	for {
		conn, err := dial()
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// PublisherStats count what a Publisher did.
type PublisherStats struct {
	Published, Confirmed, Resent, Returned, Reconnects int64
}

// Publisher sends events persistent, mandatory and with their message
// id, and counts one as handed over only on basic.ack; after a
// connection loss it sends every unconfirmed one again (duplicates are
// allowed, losses are not).
type Publisher struct {
	Dial Dialer
	// Window bounds the unconfirmed publishes in flight.
	Window int
	// OnConfirmed, if set, is called with the number confirmed so far
	// after each confirm (tests use it to strike mid-stream).
	OnConfirmed func(n int64)

	stats struct{ published, confirmed, resent, returned, reconnects atomic.Int64 }
}

// Stats returns the counts so far.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Published: p.stats.published.Load(), Confirmed: p.stats.confirmed.Load(),
		Resent: p.stats.resent.Load(), Returned: p.stats.returned.Load(), Reconnects: p.stats.reconnects.Load(),
	}
}

// Run publishes every event and returns once each is confirmed, or ctx
// ends.
func (p *Publisher) Run(ctx context.Context, events []Event) error {
	window := p.Window
	if window <= 0 {
		window = 100
	}
	unconfirmed := make(map[string]Event, window) // by message id
	next := 0
	first := true
	for next < len(events) || len(unconfirmed) > 0 {
		if !first {
			p.stats.reconnects.Add(1)
		}
		first = false
		conn, err := redial(ctx, p.Dial)
		if err != nil {
			return err
		}
		err = p.session(ctx, conn, events, &next, unconfirmed, window)
		_ = conn.Close()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// session publishes on one connection until everything is confirmed
// (nil) or the connection fails.
func (p *Publisher) session(ctx context.Context, conn *amqp091.Connection, events []Event, next *int, unconfirmed map[string]Event, window int) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := Declare(ch); err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	// An unroutable mandatory message is returned before it is acked:
	// a publisher that watches only acks would count it as delivered.
	returns := ch.NotifyReturn(make(chan amqp091.Return, window))
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	type pending struct {
		dc *amqp091.DeferredConfirmation
		ev Event
	}
	var inFlight []pending
	publish := func(ev Event, resend bool) error {
		body, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, Exchange, RoutingKey, true, false, amqp091.Publishing{
			MessageId: ev.ID, DeliveryMode: amqp091.Persistent, ContentType: "application/json", Body: body,
		})
		if err != nil {
			return err
		}
		p.stats.published.Add(1)
		if resend {
			p.stats.resent.Add(1)
		}
		inFlight = append(inFlight, pending{dc, ev})
		return nil
	}
	// Everything unconfirmed from the last connection goes again first.
	for _, ev := range unconfirmed {
		if err := publish(ev, true); err != nil {
			return err
		}
	}
	returned := map[string]bool{}
	for *next < len(events) || len(inFlight) > 0 {
		for *next < len(events) && len(inFlight) < window {
			ev := events[*next]
			unconfirmed[ev.ID] = ev
			*next++
			if err := publish(ev, false); err != nil {
				return err
			}
		}
		head := inFlight[0]
		select {
		case <-head.dc.Done():
		case e := <-closed:
			return fmt.Errorf("ledger: publisher connection lost: %v", e)
		case <-ctx.Done():
			return ctx.Err()
		}
		for len(returns) > 0 {
			r := <-returns
			returned[r.MessageId] = true
		}
		inFlight = inFlight[1:]
		if !head.dc.Acked() {
			if err := publish(head.ev, true); err != nil { // nacked: send again
				return err
			}
			continue
		}
		if returned[head.ev.ID] {
			p.stats.returned.Add(1)
			delete(returned, head.ev.ID)
			if err := publish(head.ev, true); err != nil { // acked but unroutable: not handed over
				return err
			}
			continue
		}
		delete(unconfirmed, head.ev.ID)
		n := p.stats.confirmed.Add(1)
		if p.OnConfirmed != nil {
			p.OnConfirmed(n)
		}
	}
	return nil
}

// ConsumerStats count what a Consumer did.
type ConsumerStats struct {
	Delivered, Redelivered, Applied, Deduplicated, PoisonNacked, Reconnects int64
	// MaxUnacked is the most deliveries held unacked at once.
	MaxUnacked int64
}

// ErrKilled is what AfterCommit returns to make the consumer die between
// its commit and its ack.
var ErrKilled = errors.New("ledger: consumer killed after commit, before ack")

// Consumer applies events to the ledger, exactly once each.
type Consumer struct {
	Dial Dialer
	DB   *pgxpool.Pool
	// AfterCommit, if set, runs after each commit and before the ack; when
	// it returns an error the consumer stops there, without acking, as a
	// process killed at that point would (it is up to the hook to cut the
	// connection), and Run reconnects.
	AfterCommit func(id string) error

	mu    sync.Mutex
	stats ConsumerStats
	held  int64
}

// Stats returns the counts so far.
func (c *Consumer) Stats() ConsumerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Consumer) count(f func(s *ConsumerStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// Run consumes until ctx ends, reconnecting after every connection loss.
func (c *Consumer) Run(ctx context.Context) error {
	first := true
	for {
		if !first {
			c.count(func(s *ConsumerStats) { s.Reconnects++ })
		}
		first = false
		conn, err := redial(ctx, c.Dial)
		if err != nil {
			return err
		}
		err = c.session(ctx, conn)
		_ = conn.Close()
		if ctx.Err() != nil {
			return nil
		}
		_ = err // reconnect
	}
}

func (c *Consumer) session(ctx context.Context, conn *amqp091.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := Declare(ch); err != nil {
		return err
	}
	if err := ch.Qos(Prefetch, 0, false); err != nil {
		return err
	}
	msgs, err := ch.ConsumeWithContext(ctx, WorkQueue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.held = 0
	c.mu.Unlock()
	for {
		var d amqp091.Delivery
		var ok bool
		select {
		case d, ok = <-msgs:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return errors.New("ledger: deliveries ended")
		}
		c.count(func(s *ConsumerStats) {
			s.Delivered++
			if d.Redelivered {
				s.Redelivered++
			}
		})
		if err := c.handle(ctx, d); err != nil {
			return err
		}
	}
}

// handle applies one delivery and settles it; an error ends the session
// without settling it.
func (c *Consumer) handle(ctx context.Context, d amqp091.Delivery) error {
	c.mu.Lock()
	c.held++
	c.stats.MaxUnacked = max(c.stats.MaxUnacked, c.held)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.held--
		c.mu.Unlock()
	}()
	var ev Event
	if err := json.Unmarshal(d.Body, &ev); err != nil || ev.AmountCents == nil {
		// Poison: requeue; the work queue's delivery limit quarantines it
		// after the third attempt. (A nack with requeue and no limit
		// would loop hot.)
		c.count(func(s *ConsumerStats) { s.PoisonNacked++ })
		return d.Nack(false, true)
	}
	applied, err := c.apply(ctx, d.MessageId, *ev.AmountCents)
	if err != nil {
		// The database failed: leave the delivery unacked; the broker
		// redelivers it when the session ends.
		return err
	}
	if applied {
		c.count(func(s *ConsumerStats) { s.Applied++ })
	} else {
		c.count(func(s *ConsumerStats) { s.Deduplicated++ })
	}
	if c.AfterCommit != nil {
		if err := c.AfterCommit(d.MessageId); err != nil {
			return err
		}
	}
	return d.Ack(false) // never before the commit
}

// apply records id in the dedup table and applies the amount in one
// transaction; it reports false (and changes nothing) for an id already
// applied.
func (c *Consumer) apply(ctx context.Context, id string, cents int64) (bool, error) {
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `insert into processed (message_id) values ($1) on conflict do nothing`, id)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 0 {
		return false, nil // a duplicate: roll back, ack
	}
	if _, err := tx.Exec(ctx, `insert into ledger (message_id, amount_cents) values ($1, $2)`, id, cents); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, `update balance set cents = cents + $1 where id = 1`, cents); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// Totals reads the ledger: rows, the balance and the dedup table's size.
func Totals(ctx context.Context, db *pgxpool.Pool) (rows, balance, processed int64, err error) {
	err = db.QueryRow(ctx, `select (select count(*) from ledger), (select cents from balance where id = 1), (select count(*) from processed)`).Scan(&rows, &balance, &processed)
	return rows, balance, processed, err
}

// Events returns n events evt-000000 ... with deterministic amounts; the
// ids in poison get a null amount.
func Events(n int, poison ...string) (events []Event, sum int64) {
	bad := map[string]bool{}
	for _, p := range poison {
		bad[p] = true
	}
	for i := range n {
		ev := Event{ID: fmt.Sprintf("evt-%06d", i)}
		if !bad[ev.ID] {
			a := int64(i*37%1000 + 1)
			ev.AmountCents = &a
			sum += a
		}
		events = append(events, ev)
	}
	return events, sum
}

// Poison are the experiment's three poison events.
var Poison = []string{"evt-000137", "evt-001291", "evt-002718"}
