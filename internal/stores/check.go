package stores

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// The checks New makes of the stores given in Options, before any is
// opened; their texts name the Options fields.

// CheckShared checks that the stores of shared mode (a Meta that is a
// meta.ChangeFeed) come together.
func CheckShared(o *Config) error {
	if _, ok := o.Meta.(meta.ChangeFeed); !ok {
		return nil
	}
	var errs []error
	if o.Shards == nil {
		errs = append(errs, errors.New("broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Shards must be the message store the brokers share"))
	}
	if o.Unacked == nil {
		errs = append(errs, errors.New("broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Unacked must be the unacked index the brokers share"))
	} else if _, ok := o.Unacked.(unacked.Claimer); !ok {
		errs = append(errs, errors.New("broker: Options.Storage.Meta is shared (meta.ChangeFeed): Options.Storage.Unacked must implement unacked.Claimer"))
	}
	return errors.Join(errs...)
}

// CheckDurable refuses in-memory stores given together with DataDir:
// they would silently lose what DataDir promises to keep (a confirmed
// persistent message in a durable queue, the topology) at the next start.
// Without DataDir they are just the defaults.
func CheckDurable(o *Config) error {
	if o.DataDir == "" {
		return nil
	}
	var errs []error
	lost := func(field, what string) {
		errs = append(errs, fmt.Errorf("broker: Options.Storage.%s is an in-memory store but DataDir is set: %s would be lost at restart (leave %s nil to keep them in DataDir, or leave DataDir empty for a broker that keeps nothing)", field, what, field))
	}
	if _, ok := o.Shards.(*memory.Store); ok {
		lost("Shards", "durable queues' messages, confirmed persistent ones included,")
	}
	if _, ok := o.Meta.(*metamemory.Store); ok {
		lost("Meta", "queues, exchanges, bindings, users and cursors")
	}
	if _, ok := o.Unacked.(*unacked.MemoryIndex); ok {
		lost("Unacked", "unacknowledged deliveries (redelivered=true after a restart)")
	}
	return errors.Join(errs...)
}

// CheckWrapped refuses a given store that hides optional
// interfaces of a store it embeds (meta.Hidden, storage.Hidden,
// unacked.Hidden): a wrapper written by embedding the store interface
// forwards only its methods, and the broker, finding the optional ones by
// type assertion, would silently run without them (without
// meta.ChangeFeed it would not even know the store is shared). Embedding
// is taken as the intent to forward everything; the fix is one call
// (meta.Wrap, storage.Wrap, unacked.Wrap). A wrapper that means to hide
// one holds the store in a named field instead.
func CheckWrapped(o *Config) error {
	var errs []error
	hidden := func(field, wrap string, names []string, s any) {
		if len(names) > 0 {
			errs = append(errs, fmt.Errorf("broker: Options.Storage.%s (%T) embeds a store that implements %s, but does not itself: the broker would run without %s (return %s(wrapper, inner) to keep them)",
				field, s, strings.Join(names, ", "), pronoun(len(names)), wrap))
		}
	}
	if o.Meta != nil {
		hidden("Meta", "meta.Wrap", meta.Hidden(o.Meta), o.Meta)
	}
	if o.Shards != nil {
		hidden("Shards", "storage.Wrap", storage.Hidden(o.Shards), o.Shards)
	}
	if o.Unacked != nil {
		hidden("Unacked", "unacked.Wrap", unacked.Hidden(o.Unacked), o.Unacked)
	}
	return errors.Join(errs...)
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
