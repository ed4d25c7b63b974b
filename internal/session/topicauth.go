package session

import (
	"regexp"

	"github.com/warrenmq/broker/amqp"
)

// TopicGrant is one user's topic permission on one topic exchange of a
// vhost (RabbitMQ's topic authorisation): Write must match the routing
// key of every publish to the exchange, Read the binding key of every
// bind to and unbind from it. They match unanchored, with {username} and
// {vhost} already replaced by the builder; a nil one refuses every key.
type TopicGrant struct {
	Write, Read *regexp.Regexp
}

// TopicGrants are a user's topic permissions on a vhost, by exchange
// name. An exchange that has none is not restricted, as in RabbitMQ's
// internal backend (check_topic_access answers true without a topic
// permission).
type TopicGrants map[string]TopicGrant

// SetTopics replaces the topic permissions (nil: none); open connections
// see them at their next check.
func (a *Access) SetTopics(t TopicGrants) {
	if len(t) == 0 {
		a.topics.Store(nil)
		return
	}
	a.topics.Store(&t)
}

// Topics returns the current topic permissions, nil when there are none.
func (a *Access) Topics() TopicGrants {
	if p := a.topics.Load(); p != nil {
		return *p
	}
	return nil
}

// checkTopic is RabbitMQ's check_topic_access for a publish (permWrite,
// with the routing key) or a bind or unbind (permRead, with the binding
// key) on exchange: only a topic exchange with a topic permission for the
// user is checked, and a refusal is 403 ACCESS_REFUSED with RabbitMQ
// 3.13's text (4.x prefixes it with "write access"/"read access"). The
// common case, no topic permissions at all, costs one atomic load.
func (c *Conn) checkTopic(kind permKind, exchange, key string, m amqp.Method) error {
	a := c.access
	if a == nil {
		return nil
	}
	if a.authz != nil {
		if a.authz.Authorizer == nil || c.vh == nil || c.vh.ExchangeType(exchange) != "topic" {
			return nil
		}
		return c.decide(kind, "topic", exchange, key, m)
	}
	p := a.topics.Load()
	if p == nil {
		return nil
	}
	tg, ok := (*p)[exchange]
	if !ok || c.vh == nil || c.vh.ExchangeType(exchange) != "topic" {
		return nil
	}
	re := tg.Read
	if kind == permWrite {
		re = tg.Write
	}
	if re != nil && re.MatchString(key) {
		return nil
	}
	var cls, mth uint16
	if m != nil {
		cls, mth = m.ClassID(), m.MethodID()
	}
	return amqp.NewError(amqp.AccessRefused, cls, mth,
		"access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'", key, exchange, a.vhost, a.user)
}
