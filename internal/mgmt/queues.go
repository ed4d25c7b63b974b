package mgmt

import (
	"net/http"
	"slices"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// queueRoutes: queues, their bindings (bindings.go), purging, getting
// messages (get.go) and their unacked deliveries (unacked.go).
func (m *mgmt) queueRoutes() {
	m.handle("GET", "/api/queues", anyManagement, m.queues)
	m.handle("GET", "/api/queues/{vhost}", anyManagement, m.queues)
	m.handle("GET", "/api/queues/{vhost}/{name}", anyManagement, m.queue)
	m.handle("PUT", "/api/queues/{vhost}/{name}", anyManagement, m.putQueue)
	m.handle("DELETE", "/api/queues/{vhost}/{name}", anyManagement, m.deleteQueue)
	m.handle("GET", "/api/queues/{vhost}/{name}/bindings", anyManagement, m.queueBindings)
	m.handle("DELETE", "/api/queues/{vhost}/{name}/contents", anyManagement, m.purge)
	m.handle("POST", "/api/queues/{vhost}/{name}/get", anyManagement, m.get)
	m.handle("GET", "/api/queues/{vhost}/{name}/unacked", anyManagement, m.unacked)
}

type queueJSON struct {
	Name                   string         `json:"name"`
	VHost                  string         `json:"vhost"`
	Durable                bool           `json:"durable"`
	AutoDelete             bool           `json:"auto_delete"`
	Exclusive              bool           `json:"exclusive"`
	Arguments              map[string]any `json:"arguments"`
	Node                   string         `json:"node"`
	State                  string         `json:"state"`
	Type                   string         `json:"type"`
	Messages               uint64         `json:"messages"`
	MessagesReady          uint64         `json:"messages_ready"`
	MessagesUnacknowledged uint64         `json:"messages_unacknowledged"`
	// The lengths' details, with a rate history (rates.go).
	MessagesDetails               *rates.Details `json:"messages_details,omitempty"`
	MessagesReadyDetails          *rates.Details `json:"messages_ready_details,omitempty"`
	MessagesUnacknowledgedDetails *rates.Details `json:"messages_unacknowledged_details,omitempty"`
	Consumers                     int            `json:"consumers"`
	Memory                        uint64         `json:"memory"`
	ExclusiveConsumerTag          *string        `json:"exclusive_consumer_tag"`
	MessageStats                  map[string]any `json:"message_stats"`
	policyFields
	// Only for a single queue, as in RabbitMQ.
	ConsumerDetails []consumerJSON `json:"consumer_details,omitempty"`
	// Streams only (stream.go).
	*streamJSON
	// Queues with a raft group of their own, on a cluster member.
	*raftQueueJSON
}

// raftQueueJSON is a quorum queue's or stream's replicas, in RabbitMQ
// 4.x's shapes (rabbit_quorum_queue's info keys leader, members and
// online): node names; online is the members the answering node hears
// from.
type raftQueueJSON struct {
	Leader  string   `json:"leader"`
	Members []string `json:"members"`
	Online  []string `json:"online"`
}

// withRaft adds r's fields; the queue's node is its leader, as RabbitMQ
// reports a quorum queue's, when one is known, and a queue with a group
// that is not a stream is a quorum queue.
func (q queueJSON) withRaft(r *meta.QueueReplication) queueJSON {
	if r == nil {
		return q
	}
	q.raftQueueJSON = &raftQueueJSON{Leader: r.Leader, Members: r.Members, Online: r.Online}
	if q.Type == "classic" {
		q.Type = "quorum" // a stream's type is set already
	}
	if r.Leader != "" {
		q.Node = r.Leader
	}
	return q
}

// queueOf is q's object, with the details of its rates under rq.
func (m *mgmt) queueOf(q Queue, rq rateQueries) queueJSON {
	key := rates.QueueKey(q.VHost, q.Name)
	out := queueJSON{
		Name: q.Name, VHost: q.VHost, Durable: q.Durable, AutoDelete: q.AutoDelete,
		Exclusive: q.Exclusive, Arguments: definitions.TableJSON(q.Args), Node: m.node(), State: "running",
		Type: "classic", Messages: q.Ready + q.Unacked, MessagesReady: q.Ready, MessagesUnacknowledged: q.Unacked,
		Consumers: q.Consumers, Memory: q.Memory, policyFields: policyFieldsOf(q.Policy),
		MessageStats: messageStats(queueStats, QueueValues(q.Counters), m.details(key, rq.msg)),
	}
	if d := m.details(key, rq.lengths); d != nil {
		out.MessagesDetails, out.MessagesReadyDetails, out.MessagesUnacknowledgedDetails = &d[rates.Messages], &d[rates.MessagesReady], &d[rates.MessagesUnacknowledged]
	}
	return out.withStream(q.Stream).withRaft(q.Replication)
}

func (m *mgmt) queues(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	rq, lq, ok := listParams(c)
	if !ok {
		return
	}
	if lq.paged() && lq.byName() {
		m.queuesPage(c, vhs, lq, rq)
		return
	}
	out := []queueJSON{}
	for _, vh := range vhs {
		qs := m.b.Queues(c.r.Context(), vh)
		out = slices.Grow(out, len(qs))
		for _, q := range qs {
			out = append(out, m.queueOf(q, rq))
		}
	}
	// The exclusive consumer's tag comes from the channels.
	m.setExclusiveTags(out)
	writeListQuery(c, lq, out)
}

func (m *mgmt) exclusiveConsumers() map[[2]string]string {
	out := make(map[[2]string]string)
	for _, conn := range m.b.Connections() {
		for _, ch := range conn.Channels {
			for _, cons := range ch.Consumers {
				if cons.Exclusive {
					out[[2]string{cons.VHost, cons.Queue}] = cons.Tag
				}
			}
		}
	}
	return out
}

// queueParam returns the vhost and queue a path names, or answers 404.
func (m *mgmt) queueParam(c *mgmtCall) (string, string, bool) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return "", "", false
	}
	if !m.b.HasQueue(vh, c.p("name")) {
		notFound(c.w)
		return "", "", false
	}
	return vh, c.p("name"), true
}

func (m *mgmt) queue(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok {
		return
	}
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	q, ok := m.b.Queue(c.r.Context(), vh, name)
	if !ok {
		notFound(c.w)
		return
	}
	out := m.queueOf(q, rq)
	out.ConsumerDetails = []consumerJSON{}
	for _, cons := range m.consumerList(c, func(ci Consumer) bool { return ci.VHost == q.VHost && ci.Queue == q.Name }) {
		out.ConsumerDetails = append(out.ConsumerDetails, cons)
		if cons.Exclusive {
			tag := cons.ConsumerTag
			out.ExclusiveConsumerTag = &tag
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) putQueue(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	var body struct {
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
	}
	// As for exchanges: looked up as sent, declared without CR and LF
	// (a name of nothing else is a server-named queue, as in RabbitMQ).
	raw := c.p("name")
	name := routing.StripCRLF(raw)
	if !m.permit(c, vh, mgmtCheck{mgmtConfigure, "queue", name}) || !readBody(c, &body) {
		return
	}
	args, ok := tableArg(c, body.Arguments)
	if !ok {
		return
	}
	existed := m.b.HasQueue(vh, raw)
	// The management API declares no exclusive queues; redeclaring one
	// fails with 405 RESOURCE_LOCKED (400 here), as in RabbitMQ.
	err := m.b.DeclareQueue(c.r.Context(), vh, &amqp.QueueDeclare{Queue: name, Durable: bool(body.Durable), AutoDelete: bool(body.AutoDelete), Arguments: args})
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	created(c.w, !existed)
}

func (m *mgmt) deleteQueue(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok || !m.permit(c, vh, mgmtCheck{mgmtConfigure, "queue", name}) {
		return
	}
	query := c.r.URL.Query()
	// As a connection of its own, the API cannot delete another
	// connection's exclusive queue (405 RESOURCE_LOCKED).
	noContent(c.w, m.b.DeleteQueue(c.r.Context(), vh, name, query.Get("if-unused") == "true", query.Get("if-empty") == "true"))
}

func (m *mgmt) purge(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok || !m.permit(c, vh, mgmtCheck{mgmtRead, "queue", name}) {
		return
	}
	// Another connection's exclusive queue is 405; a queue gone since is
	// 404.
	noContent(c.w, m.b.Purge(c.r.Context(), vh, name))
}
