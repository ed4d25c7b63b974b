package rates

// The layouts of what the broker records, shared by its sampler (which
// records values in this order) and the management API (which names
// them). Keys name the objects.

// Message values of the broker, a vhost or a queue: MessageCounters
// counters, then the queue length gauges.
const (
	Publish = iota
	Confirm
	ReturnUnroutable
	DropUnroutable
	Deliver
	DeliverNoAck
	Get
	GetNoAck
	DeliverGet
	Redeliver
	Ack
	DeadLettered
	Messages
	MessagesReady
	MessagesUnacknowledged

	MessageValues   = MessagesUnacknowledged + 1
	MessageCounters = Messages
)

// MessageNames are RabbitMQ's names of the message values, in order.
var MessageNames = [MessageValues]string{
	"publish", "confirm", "return_unroutable", "drop_unroutable", "deliver", "deliver_no_ack",
	"get", "get_no_ack", "deliver_get", "redeliver", "ack", "dead_lettered",
	"messages", "messages_ready", "messages_unacknowledged",
}

// Octet values of a connection: both counters.
const (
	RecvOct = iota
	SendOct

	OctetValues = SendOct + 1
)

// BrokerKey is the key of the broker's own recorded object; the functions
// below give the keys of the others.
const BrokerKey = "broker"

// VHostKey names a vhost, QueueKey a queue, ConnKey a connection (by its
// ID).
func VHostKey(vhost string) string       { return "vhost\x00" + vhost }
func QueueKey(vhost, name string) string { return "queue\x00" + vhost + "\x00" + name }
func ConnKey(id string) string           { return "conn\x00" + id }
