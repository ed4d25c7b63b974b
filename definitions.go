package broker

import (
	"context"

	"github.com/warrenmq/broker/definitions"
)

// ExportDefinitions returns the broker's definitions in RabbitMQ's format
// (definitions.Export): the stored users with their salted password
// hashes and each hash's hashing_algorithm (what Warren hashes itself is
// rabbit_password_hashing_sha256; imported sha512 and md5 hashes keep
// theirs), the vhosts, the stored permissions, and the exchanges, queues
// and bindings declared in every vhost, except what RabbitMQ leaves out
// too (exclusive and server-named queues, predeclared exchanges). The
// product fields name Warren and its Version.
func (b *Broker) ExportDefinitions(ctx context.Context) (*definitions.File, error) {
	d, err := definitions.Export(ctx, definitionsView{b})
	if err != nil {
		return nil, err
	}
	d.ProductName, d.ProductVersion = "Warren", Version
	return d, nil
}

// ImportDefinitions applies d to the broker as RabbitMQ's import does
// (definitions.Import): every part is checked first and a file that fails
// a check changes nothing; then vhosts, users, permissions, exchanges,
// queues and bindings are created or declared, and an error while doing so
// (an inequivalent redeclare) leaves the earlier changes in place. What
// exists and is not in d is untouched.
func (b *Broker) ImportDefinitions(ctx context.Context, d *definitions.File) error {
	return definitions.Import(ctx, definitionsView{b}, d)
}
