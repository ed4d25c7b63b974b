package vhost

import (
	"bytes"

	"github.com/warrenmq/broker/amqp"
)

// SenderSelected implements the publish half of RabbitMQ's sender-selected
// distribution: it returns the extra routing keys a publish's CC and BCC
// headers name, and props with the BCC header removed (props itself when
// there is no BCC header), to be routed with RouteCC and stored instead of
// the published properties.
//
// The rules are RabbitMQ 3.13's rabbit_basic:header_routes, which 4.x keeps
// for AMQP 0-9-1 (its docs describe the same headers): each header, when
// present, must be an array, else the publish is refused with 406
// "invalid message: {unacceptable_type_in_header,"CC",longstr}" (CC is
// checked before BCC); the array's long strings are routing keys and its
// other elements are skipped; the keys are case-sensitive. Duplicates are
// harmless: RouteCC lists a queue once. CC stays in the delivered headers.
func SenderSelected(props []byte) (keys []string, out []byte, err error) {
	// A cheap look for the header names, as table keys (a length octet
	// then the name), spares the decoding of every other publish's
	// headers; a false hit only costs that decoding.
	if !bytes.Contains(props, []byte("\x02CC")) && !bytes.Contains(props, []byte("\x03BCC")) {
		return nil, props, nil
	}
	p, err := amqp.DecodeProperties(props)
	if err != nil {
		return nil, props, err
	}
	for _, h := range [...]string{"CC", "BCC"} {
		v, ok := p.Headers[h]
		if !ok {
			continue
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, props, amqp.NewError(amqp.PreconditionFailed, 0, 0,
				"invalid message: {unacceptable_type_in_header,\"%s\",%s}", h, fieldType(v))
		}
		for _, e := range arr {
			if s, ok := e.(string); ok {
				keys = append(keys, s)
			}
		}
	}
	if _, ok := p.Headers["BCC"]; !ok {
		return keys, props, nil
	}
	delete(p.Headers, "BCC")
	return keys, p.Append(nil), nil
}
