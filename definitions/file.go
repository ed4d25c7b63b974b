package definitions

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// File is RabbitMQ's definitions file (definitions.json, as rabbitmqctl
// export_definitions and GET /api/definitions write it in RabbitMQ 3.10):
// vhosts, users, permissions, exchanges, queues and bindings. Messages are
// not part of it.
//
// Export fills every section. Import applies what Warren
// can honour and refuses, before changing anything, a file that asks for
// something it cannot (see Import).
type File struct {
	// The version fields say who wrote the file; Import ignores them.
	// Export writes CompatVersion as rabbit(mq)_version; a broker writes
	// the RabbitMQ version it behaves as there instead (the one its
	// connection.start and /api/overview report), and its own name and
	// version as product.
	RabbitVersion   string `json:"rabbit_version,omitempty"`
	RabbitMQVersion string `json:"rabbitmq_version,omitempty"`
	ProductName     string `json:"product_name,omitempty"`
	ProductVersion  string `json:"product_version,omitempty"`

	Users            []User            `json:"users"`
	VHosts           []VHost           `json:"vhosts"`
	Permissions      []Permission      `json:"permissions"`
	TopicPermissions []TopicPermission `json:"topic_permissions"`
	Parameters       []Parameter       `json:"parameters"`
	GlobalParameters []GlobalParameter `json:"global_parameters"`
	Policies         []Policy          `json:"policies"`
	Queues           []Queue           `json:"queues"`
	Exchanges        []Exchange        `json:"exchanges"`
	Bindings         []Binding         `json:"bindings"`
}

// User is a user with a salted password hash (meta's, the one User
// type).
type User = meta.User

// UserTags are a user's tags, a list or a comma-separated string.
type UserTags = meta.UserTags

// VHost is a virtual host with its metadata and limits. Export writes
// the metadata of a vhost that has any twice, at the top level and under
// "metadata", as RabbitMQ 3.13 and 4.x do (a vhost without metadata or
// limits is its name alone, as in 3.10); Import reads the top level first and "metadata" for
// what is missing there, as RabbitMQ's rabbit_definitions:add_vhost does.
// Limits are the vhost's limits ("max-connections", "max-queues"); a file
// may also carry them as a "vhost-limits" parameter, as RabbitMQ writes
// them too.
type VHost struct {
	Name             string         `json:"name"`
	Description      string         `json:"description,omitempty"`
	Tags             UserTags       `json:"tags,omitempty"`
	DefaultQueueType string         `json:"default_queue_type,omitempty"`
	Metadata         *VHostMetadata `json:"metadata,omitempty"`
	Limits           VHostLimits    `json:"limits,omitempty"`
}

// VHostMetadata is a vhost's "metadata" object.
type VHostMetadata struct {
	Description      string   `json:"description"`
	Tags             UserTags `json:"tags"`
	DefaultQueueType string   `json:"default_queue_type,omitempty"`
}

// VHostLimits are a vhost's limits by name. RabbitMQ writes a vhost
// without limits as [] and one with limits as an object; both read.
type VHostLimits map[string]int64

// UnmarshalJSON reads an object of integer limits, or an empty list.
func (l *VHostLimits) UnmarshalJSON(b []byte) error {
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err == nil {
		if len(list) > 0 {
			return errors.New("broker: vhost limits are a list, not an object")
		}
		*l = nil
		return nil
	}
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("broker: vhost limits: %w", err)
	}
	*l = m
	return nil
}

// Resolved returns v with the metadata RabbitMQ keeps in two places
// merged: the top-level fields, completed from Metadata.
func (v VHost) Resolved() VHost {
	if m := v.Metadata; m != nil {
		if v.Description == "" {
			v.Description = m.Description
		}
		if v.Tags == nil {
			v.Tags = m.Tags
		}
		if v.DefaultQueueType == "" {
			v.DefaultQueueType = m.DefaultQueueType
		}
	}
	v.Metadata = nil
	return v
}

// TopicPermission is a user's topic permission on one topic exchange of a
// vhost: the routing keys it may publish with (write) and bind with
// (read), as RabbitMQ's topic_permissions section carries it.
type TopicPermission = meta.TopicPermission

// Permission grants a user configure, write and read regular expressions
// on a vhost.
type Permission = meta.Permission

// Parameter is a runtime parameter as the file's "parameters" section
// carries it: {"value":…,"vhost":…,"component":…,"name":…}. Operator
// policies ride in it as component "operator_policy".
type Parameter = meta.Parameter

// GlobalParameter is a "global_parameters" entry: {"name":…,"value":…}.
type GlobalParameter = meta.GlobalParameter

// Queue is a queue declaration.
type Queue struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// Exchange is an exchange declaration.
type Exchange struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// Binding binds Source to a queue or exchange (DestinationType "queue" or
// "exchange").
type Binding struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// BindingOf is bd, a binding in the vhost named vhost, as a file carries
// it (and RabbitMQ's management API lists it).
func BindingOf(vhost string, bd routing.Binding) Binding {
	dt := "queue"
	if bd.Destination.Exchange {
		dt = "exchange"
	}
	return Binding{
		Source: bd.Source, VHost: vhost, Destination: bd.Destination.Name, DestinationType: dt,
		RoutingKey: bd.Key, Arguments: TableJSON(bd.Args),
	}
}

// CompatVersion is the RabbitMQ release whose definitions format (and
// management API) Warren follows.
const CompatVersion = "3.10.0"

// Hashing algorithm names as RabbitMQ writes them in hashing_algorithm.
const (
	HashingSHA256 = passwd.SHA256
	HashingSHA512 = passwd.SHA512
	HashingMD5    = passwd.MD5
)

// Read parses a definitions file. Numbers in arguments keep their integer
// type (int64) when they are whole; a second JSON value after the first is
// an error.
func Read(r io.Reader) (*File, error) {
	var d File
	if err := DecodeJSON(r, &d); err != nil {
		return nil, fmt.Errorf("broker: definitions: %w", err)
	}
	return &d, nil
}
