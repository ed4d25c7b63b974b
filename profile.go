package broker

import "github.com/warrenmq/broker/internal/compat"

// profile returns the RabbitMQ version profile Options.RabbitMQVersion
// selects (internal/compat), the default one for "" or a value validate
// refuses.
func (o *Options) profile() compat.Profile {
	p, err := compat.Parse(o.RabbitMQVersion)
	if err != nil {
		return compat.Default()
	}
	return p
}
