package broker

import (
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/control"
)

// The definitions adapter's part for vhost metadata, vhost limits and
// topic permissions (vhostsettings.go).

func (v definitionsView) CheckVHost(d definitions.VHost) error { return control.CheckVHost(d) }

func (v definitionsView) CheckTopicPermission(p definitions.TopicPermission) error {
	return control.CheckTopicPermission(p)
}
