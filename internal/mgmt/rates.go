package mgmt

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenmq/broker/internal/rates"
)

// Rates: every counter and queue length the API shows has RabbitMQ's
// "<name>_details" object beside it, {"rate": per second}, computed from
// the broker's history (package rates), and with history parameters
// (msg_rates_age/msg_rates_incr for message counters, lengths_age/
// lengths_incr for queue lengths, data_rates_age/data_rates_incr for a
// connection's octets; seconds, as RabbitMQ's) also its samples, avg_rate
// and avg. Without a history (the Broker is no Rater, or its Rates is nil) no details are
// shown, as RabbitMQ shows none with statistics disabled.

// rateQueries are a request's history parameters.
type rateQueries struct {
	msg, lengths, data rates.Query
}

// parseRateQueries reads them: each pair is given together, as positive
// whole seconds; anything else is 400.
func parseRateQueries(r *http.Request) (rateQueries, error) {
	var q rateQueries
	for _, p := range []struct {
		prefix string
		into   *rates.Query
	}{{"msg_rates", &q.msg}, {"lengths", &q.lengths}, {"data_rates", &q.data}} {
		age, incr := r.URL.Query().Get(p.prefix+"_age"), r.URL.Query().Get(p.prefix+"_incr")
		if age == "" && incr == "" {
			continue
		}
		a, errA := strconv.ParseUint(age, 10, 31)
		i, errI := strconv.ParseUint(incr, 10, 31)
		if errA != nil || errI != nil || a == 0 || i == 0 {
			return q, fmt.Errorf("%s_age and %s_incr must both be positive whole numbers of seconds, got %q and %q", p.prefix, p.prefix, age, incr)
		}
		*p.into = rates.Query{Age: time.Duration(a) * time.Second, Incr: time.Duration(i) * time.Second}
	}
	return q, nil
}

// rateQueriesOf parses c's history parameters, answering 400 when they
// are bad.
func rateQueriesOf(c *mgmtCall) (rateQueries, bool) {
	q, err := parseRateQueries(c.r)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return q, false
	}
	return q, true
}

// Rater is the optional part of a Broker that keeps a rate history; a
// Broker without it, or whose Rates is nil, shows no details.
type Rater interface {
	Rates() *rates.Recorder
}

// listParams reads a listing's history and paging parameters (paging.go),
// answering 400 when either is bad.
func listParams(c *mgmtCall) (rateQueries, listQuery, bool) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return rq, listQuery{}, false
	}
	lq, ok := parseListQuery(c)
	return rq, lq, ok
}

// details returns the object key's details under q, nil without history.
func (m *mgmt) details(key string, q rates.Query) []rates.Details {
	r, ok := m.b.(Rater)
	if !ok {
		return nil
	}
	rec := r.Rates()
	if rec == nil {
		return nil
	}
	return rec.Details(key, q, time.Now())
}

// QueueValues lays a queue's counters out as BrokerValues does; a
// queue's publish counts the messages it took. The broker's sampler
// records these and the API shows them, so both name the same values.
func QueueValues(c Counters) [rates.MessageValues]uint64 {
	v := BrokerValues(c)
	v[rates.Publish] = c.Enqueued
	return v
}

// BrokerValues lays the broker's counters c out as the rates package
// records message values (the queue lengths left zero).
func BrokerValues(c Counters) [rates.MessageValues]uint64 {
	return [rates.MessageValues]uint64{
		rates.Publish: c.Published, rates.Confirm: c.Confirmed,
		rates.ReturnUnroutable: c.ReturnedUnroutable, rates.DropUnroutable: c.DroppedUnroutable,
		rates.Deliver: c.Delivered, rates.DeliverNoAck: c.DeliveredNoAck, rates.Get: c.Got, rates.GetNoAck: c.GotNoAck,
		rates.DeliverGet: c.Delivered + c.DeliveredNoAck + c.Got + c.GotNoAck,
		rates.Redeliver:  c.Redelivered, rates.Ack: c.Acked, rates.DeadLettered: c.DeadLettered,
	}
}

// Which message values each object's message_stats shows: a queue takes
// messages (publish counts what it took) but confirms nothing.
var (
	brokerStats = []int{rates.Publish, rates.Confirm, rates.ReturnUnroutable, rates.DropUnroutable,
		rates.Deliver, rates.DeliverNoAck, rates.Get, rates.GetNoAck, rates.DeliverGet, rates.Redeliver, rates.Ack, rates.DeadLettered}
	queueStats = []int{rates.Publish, rates.Deliver, rates.DeliverNoAck, rates.Get, rates.GetNoAck,
		rates.DeliverGet, rates.Redeliver, rates.Ack, rates.DeadLettered}
	lengthValues = []int{rates.Messages, rates.MessagesReady, rates.MessagesUnacknowledged}
)

// messageStats is a message_stats object of the values which, each with
// its details when d has them. confirm is left out while it is zero, as
// RabbitMQ leaves it out for a broker nobody confirmed to.
func messageStats(which []int, vals [rates.MessageValues]uint64, d []rates.Details) map[string]any {
	out := make(map[string]any, 2*len(which))
	for _, i := range which {
		if i == rates.Confirm && vals[i] == 0 {
			continue
		}
		name := rates.MessageNames[i]
		out[name] = vals[i]
		if d != nil {
			out[name+"_details"] = d[i]
		}
	}
	return out
}

// addLengths sets the queue length values of vals, each with its details
// when d has them, in obj.
func addLengths(obj map[string]any, vals [rates.MessageValues]uint64, d []rates.Details) {
	for _, i := range lengthValues {
		name := rates.MessageNames[i]
		obj[name] = vals[i]
		if d != nil {
			obj[name+"_details"] = d[i]
		}
	}
}

// lengthsOf lays out queue lengths as the rates package records them.
func lengthsOf(ready, unacked uint64) [rates.MessageValues]uint64 {
	return [rates.MessageValues]uint64{rates.Messages: ready + unacked, rates.MessagesReady: ready, rates.MessagesUnacknowledged: unacked}
}
