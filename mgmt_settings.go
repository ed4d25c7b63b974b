package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/meta"
)

// The management adapter's part for vhost metadata, vhost limits and topic
// permissions (vhostsettings.go; internal/mgmt's Settings).

func (v mgmtView) VHostInfo(ctx context.Context, name string) (definitions.VHost, error) {
	return v.b.Admin().GetVHost(ctx, name)
}

func (v mgmtView) PutVHost(ctx context.Context, d definitions.VHost) (bool, error) {
	if err := v.b.definitions().CheckVHost(d); err != nil {
		return false, fmt.Errorf("%w: %w", mgmt.ErrInvalid, err)
	}
	if len(canonicalVHost(d.Name)) > 255 {
		return false, fmt.Errorf("%w: vhost name longer than 255 bytes", mgmt.ErrInvalid)
	}
	return v.b.putVHost(ctx, VHost{Name: d.Name, Description: d.Description, Tags: d.Tags,
		DefaultQueueType: d.DefaultQueueType})
}

func (v mgmtView) VHostLimits() map[string]map[string]int64 { return v.b.vhostLimits() }

func (v mgmtView) SetVHostLimit(ctx context.Context, vhostName, name string, value int64) error {
	err := v.b.setVHostLimit(ctx, vhostName, name, value)
	if errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: %w", mgmt.ErrNotFound, err)
	}
	return err
}

func (v mgmtView) ClearVHostLimit(ctx context.Context, vhostName, name string) error {
	return v.b.clearVHostLimit(ctx, vhostName, name)
}

func (v mgmtView) TopicPermissions(ctx context.Context) ([]definitions.TopicPermission, error) {
	return v.b.Admin().ListTopicPermissions(ctx)
}

func (v mgmtView) PutTopicPermission(ctx context.Context, p definitions.TopicPermission) error {
	if err := v.b.definitions().CheckTopicPermission(p); err != nil {
		return fmt.Errorf("%w: %w", mgmt.ErrInvalid, err)
	}
	_, err := v.b.setTopicPermission(ctx, p.User, p.VHost, TopicPermission{Exchange: p.Exchange, Write: p.Write, Read: p.Read})
	return err
}

func (v mgmtView) DeleteTopicPermission(ctx context.Context, user, vhostName string) error {
	return v.b.clearTopicPermission(ctx, user, vhostName, "")
}
