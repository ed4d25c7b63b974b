package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/meta"
)

// The definitions adapter's part for vhost metadata, vhost limits and
// topic permissions (vhostsettings.go).

func (v definitionsView) VHost(ctx context.Context, name string) (definitions.VHost, error) {
	info, err := v.b.VHostInfo(ctx, name)
	if err != nil {
		return definitions.VHost{}, err
	}
	d := definitions.VHost{Name: info.Name, Description: info.Description, Tags: info.Tags,
		DefaultQueueType: info.DefaultQueueType}
	if l := v.b.VHostLimits()[info.Name]; len(l) > 0 {
		d.Limits = l
	}
	return d, nil
}

func (v definitionsView) TopicPermissions(ctx context.Context) ([]definitions.TopicPermission, error) {
	tps, err := v.b.TopicPermissions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]definitions.TopicPermission, len(tps))
	for i, p := range tps {
		out[i] = topicPermissionDefinition(p)
	}
	return out, nil
}

func topicPermissionDefinition(p meta.TopicPermission) definitions.TopicPermission {
	return definitions.TopicPermission{User: p.User, VHost: p.VHost, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
}

func (v definitionsView) CheckVHost(d definitions.VHost) error {
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

func (v definitionsView) CheckTopicPermission(p definitions.TopicPermission) error {
	_, err := compileTopicGrant(meta.TopicPermission{User: p.User, VHost: canonicalVHost(p.VHost), Write: p.Write, Read: p.Read})
	return err
}

func (v definitionsView) PutVHost(ctx context.Context, d definitions.VHost) error {
	_, err := v.b.PutVHost(ctx, VHostInfo{Name: d.Name, Description: d.Description, Tags: d.Tags,
		DefaultQueueType: d.DefaultQueueType})
	return err
}

func (v definitionsView) SetVHostLimit(ctx context.Context, vhostName, name string, value int64) error {
	return v.b.SetVHostLimit(ctx, vhostName, name, value)
}

func (v definitionsView) SetTopicPermission(ctx context.Context, p definitions.TopicPermission) error {
	_, err := v.b.SetTopicPermission(ctx, p.User, p.VHost, TopicPermission{Exchange: p.Exchange, Write: p.Write, Read: p.Read})
	return err
}
