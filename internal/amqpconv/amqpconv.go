package amqpconv

import (
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
)

// Properties is msg's properties as the broker encodes them (its Body is
// not read). Headers must have passed amqp091.Table.Validate.
func Properties(msg *amqp091.Publishing) amqp.Properties {
	return amqp.Properties{
		ContentType:     msg.ContentType,
		ContentEncoding: msg.ContentEncoding,
		Headers:         ToTable(msg.Headers),
		DeliveryMode:    msg.DeliveryMode,
		Priority:        msg.Priority,
		CorrelationID:   msg.CorrelationId,
		ReplyTo:         msg.ReplyTo,
		Expiration:      msg.Expiration,
		MessageID:       msg.MessageId,
		Timestamp:       msg.Timestamp,
		Type:            msg.Type,
		UserID:          msg.UserId,
		AppID:           msg.AppId,
	}
}

// Publishing is decoded properties in amqp091-go's type, without a body.
// The timestamp is kept as decoded (UTC); nested timestamps in headers are
// in local time, as amqp091-go decodes them (FromTable).
func Publishing(p *amqp.Properties) amqp091.Publishing {
	return amqp091.Publishing{
		Headers:         FromTable(p.Headers),
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		DeliveryMode:    p.DeliveryMode,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationID,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageID,
		Timestamp:       p.Timestamp,
		Type:            p.Type,
		UserId:          p.UserID,
		AppId:           p.AppID,
	}
}

// Delivery is decoded properties in a Delivery, as amqp091-go fills one
// from the wire (the timestamp in local time); the caller sets the
// delivery's other fields.
func Delivery(p *amqp.Properties) amqp091.Delivery {
	m := Publishing(p)
	return amqp091.Delivery{
		Headers: m.Headers, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
		ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId,
		Timestamp: LocalTime(m.Timestamp), Type: m.Type, UserId: m.UserId, AppId: m.AppId,
	}
}

// Return is decoded properties in a Return, as amqp091-go fills one from
// the wire (the timestamp in local time); the caller sets the reply code,
// text, exchange, routing key and body.
func Return(p *amqp.Properties) amqp091.Return {
	m := Publishing(p)
	return amqp091.Return{
		Headers: m.Headers, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
		ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId,
		Timestamp: LocalTime(m.Timestamp), Type: m.Type, UserId: m.UserId, AppId: m.AppId,
	}
}

// DeliveryPublishing is the properties part of a delivery as a
// Publishing, without the body: Delivery reversed.
func DeliveryPublishing(d *amqp091.Delivery) amqp091.Publishing {
	return amqp091.Publishing{
		Headers: d.Headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, Expiration: d.Expiration, MessageId: d.MessageId,
		Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId, AppId: d.AppId,
	}
}

// LocalTime gives a timestamp the location amqp091-go decodes them in
// (time.Unix: local), so the direct Channel and a socket client see equal
// values. The zero time stays zero.
func LocalTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0)
}

// ToTable converts amqp091-go's field table to the broker's: the value
// types are the same except nested tables and decimals.
func ToTable(t amqp091.Table) amqp.Table { return convertTable[amqp.Table](t, toValue) }

// toValue is one value of ToTable.
func toValue(v any) any {
	switch v := v.(type) {
	case amqp091.Table:
		return ToTable(v)
	case []any:
		return convertArray(v, toValue)
	case amqp091.Decimal:
		return amqp.Decimal{Scale: v.Scale, Value: v.Value}
	}
	return v
}

// FromTable converts the broker's field table to amqp091-go's, with the
// value types amqp091-go decodes from the wire.
func FromTable(t amqp.Table) amqp091.Table { return convertTable[amqp091.Table](t, fromValue) }

// fromValue is one value of FromTable.
func fromValue(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return FromTable(v)
	case map[string]any:
		return FromTable(v)
	case []any:
		return convertArray(v, fromValue)
	case amqp.Decimal:
		return amqp091.Decimal{Scale: v.Scale, Value: v.Value}
	case time.Time:
		return LocalTime(v)
	}
	return v
}

// convertTable is the walk ToTable and FromTable share: a copy of t of
// the other package's table type, each value converted by conv (which
// recurses into nested tables); nil stays nil.
func convertTable[To, From ~map[string]any](t From, conv func(any) any) To {
	if t == nil {
		return nil
	}
	out := make(To, len(t))
	for k, v := range t {
		out[k] = conv(v)
	}
	return out
}

// convertArray is a field array with each element converted by conv.
func convertArray(a []any, conv func(any) any) []any {
	out := make([]any, len(a))
	for i, e := range a {
		out[i] = conv(e)
	}
	return out
}
