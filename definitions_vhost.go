package broker

import (
	"fmt"
	"slices"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/access"
	"github.com/warrenmq/broker/meta"
)

// The definitions adapter's part for vhost metadata, vhost limits and
// topic permissions (vhostsettings.go).

func (v definitionsView) CheckVHost(d definitions.VHost) error { return checkVHost(d) }

func (v definitionsView) CheckTopicPermission(p definitions.TopicPermission) error {
	return checkTopicPermission(p)
}

// checkVHost reports why v's default queue type or limits could not be
// used.
func checkVHost(d VHost) error {
	if d.DefaultQueueType != "" && !slices.Contains(QueueTypes, d.DefaultQueueType) {
		return fmt.Errorf("unknown queue type '%s'", d.DefaultQueueType)
	}
	for name := range d.Limits {
		if name != LimitMaxConnections && name != LimitMaxQueues {
			return fmt.Errorf("unknown limit %q (want %s or %s)", name, LimitMaxConnections, LimitMaxQueues)
		}
	}
	return nil
}

// checkTopicPermission reports why p's expressions could not be used.
func checkTopicPermission(p TopicPermission) error {
	_, err := access.CompileTopicGrant(meta.TopicPermission{User: p.User, VHost: canonicalVHost(p.VHost), Write: p.Write, Read: p.Read})
	return err
}
