package vhost

import "github.com/warrenmq/broker/amqp"

// streamProperties refuses a stream that is not durable, or is exclusive
// or auto-delete, in the order and words of RabbitMQ 4.x's
// rabbit_stream_queue:declare (rabbit_queue_type_util's check_auto_delete,
// check_exclusive and check_non_durable): 406 PRECONDITION_FAILED.
func (v *VHost) streamProperties(name string, m *amqp.QueueDeclare) error {
	prop := ""
	switch {
	case m.AutoDelete:
		prop = "auto-delete"
	case m.Exclusive:
		prop = "exclusive-owner"
	case !m.Durable:
		prop = "non-durable"
	default:
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property '%s' for %s", prop, v.resource("queue", name))
}
