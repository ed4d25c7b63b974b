package broker

import (
	"cmp"
	"sync"
	"time"

	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/rates"
)

// rateState is the history behind the management API's "*_details"
// objects: a Recorder and the sampler goroutine that feeds it. Both start
// with the first ManagementHandler, so an embedder that never serves the
// API pays nothing for them.
type rateState struct {
	once sync.Once
	rec  *rates.Recorder // nil until started, and when StatsInterval < 0
}

// DefaultStatsInterval is how often the rate history samples when
// Options.Management.StatsInterval is zero: RabbitMQ's collect_statistics_interval.
const DefaultStatsInterval = 5 * time.Second

// rateHistory starts the sampler once and returns its Recorder, nil when
// statistics are off or the broker is closed.
func (b *Broker) rateHistory() *rates.Recorder {
	b.rates.once.Do(func() {
		if b.opts.Management.StatsInterval < 0 {
			return
		}
		interval := cmp.Or(b.opts.Management.StatsInterval, DefaultStatsInterval)
		rec := rates.New(rates.Config{Interval: interval})
		if b.conns.Go(func() { b.sampleRates(rec, interval) }) {
			b.rates.rec = rec
			b.held.Rates.Store(rec) // the history counts against the memory alarm
		}
	})
	return b.rates.rec
}

// sampleRates records a round at once and then every interval until Close.
func (b *Broker) sampleRates(rec *rates.Recorder, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		b.sampleRound(rec, time.Now())
		select {
		case <-t.C:
		case <-b.quit:
			return
		}
	}
}

// sampleRound records every queue, vhost and connection and the broker's
// totals. Queue lengths are those each queue's last step left
// (queue.Counts): the sampler asks no actor, so idle queues stay idle
// (their actors' goroutines exited) however many there are.
func (b *Broker) sampleRound(rec *rates.Recorder, now time.Time) {
	rec.StartRound(now)
	var vals, vhostVals, total [rates.MessageValues]uint64
	for _, vh := range b.sortedVHosts() {
		vhostVals = [rates.MessageValues]uint64{}
		for _, q := range vh.Queues() {
			u := q.Counts()
			vals = mgmt.QueueValues(mgmt.Counters(messageCountersOf(q.Counters())))
			vals[rates.Messages], vals[rates.MessagesReady], vals[rates.MessagesUnacknowledged] = u.Ready+u.Unacked, u.Ready, u.Unacked
			rec.Record(rates.QueueKey(q.Def.VHost, q.Def.Name), false, rates.MessageCounters, vals[:])
			for i := range vals {
				vhostVals[i] += vals[i]
			}
		}
		rec.Record(rates.VHostKey(vh.Name()), true, rates.MessageCounters, vhostVals[:])
		for i := rates.Messages; i < rates.MessageValues; i++ {
			total[i] += vhostVals[i]
		}
	}
	lengths := total
	total = mgmt.BrokerValues(mgmt.Counters(b.totals()))
	copy(total[rates.Messages:], lengths[rates.Messages:])
	rec.Record(rates.BrokerKey, true, rates.MessageCounters, total[:])
	var oct [rates.OctetValues]uint64
	for _, c := range b.sortedConns() {
		in := c.Info()
		oct[rates.RecvOct], oct[rates.SendOct] = in.RecvOct, in.SendOct
		rec.Record(rates.ConnKey(in.ID), false, rates.OctetValues, oct[:])
	}
	rec.EndRound()
}
