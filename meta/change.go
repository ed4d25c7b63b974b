package meta

// ChangeKind says what a Change reports.
type ChangeKind uint8

const (
	// ChangeTopology: an exchange, queue or binding of VHost was put or
	// deleted. VHost "" means the set of vhosts, or a vhost's metadata or
	// limits, changed.
	ChangeTopology ChangeKind = iota + 1
	// ChangeAppended: records were appended to Shard; Offset is the shard's
	// next offset after the append (its tail).
	ChangeAppended
	// ChangeCursor: the cursor of VHost/Queue moved to Offset.
	ChangeCursor
	// ChangeReturned: the unacked index entry VHost/Queue/Offset was written
	// in state Returned (a requeued message, up for any broker to claim);
	// DeliveryCount is the entry's count.
	ChangeReturned
	// ChangeTaken: the Returned entry VHost/Queue/Offset was claimed
	// (overwritten in state Delivered) or deleted.
	ChangeTaken
	// ChangeReset: the local replica was replaced wholesale (a raft
	// snapshot was installed): anything may have changed, so whoever
	// follows the store reloads what it keeps.
	ChangeReset
	// ChangePolicy: a policy or operator policy of VHost was put or
	// deleted (Policies).
	ChangePolicy
	// ChangeRecord: the record under key Shard was set (Records); its
	// deletion is not told.
	ChangeRecord
	// ChangeParameter: the runtime parameter Component/VHost/Name was put
	// or deleted (Parameters); Component and VHost are "" for the global
	// parameter Name.
	ChangeParameter
)

// Change is one change applied to a store that several brokers share.
type Change struct {
	Kind          ChangeKind
	VHost         string
	Queue         string // ChangeCursor, ChangeReturned, ChangeTaken
	Shard         string // ChangeAppended; the key, for ChangeRecord
	Offset        uint64
	DeliveryCount uint32
	Component     string // ChangeParameter
	Name          string // ChangeParameter
}

// ChangeFeed is implemented by stores that other brokers write to as well,
// such as a cluster's replicated store (meta/raft). A broker whose
// Store implements it runs in shared mode: it follows topology written by
// other brokers, and its queues follow appends, cursor moves and requeues
// made elsewhere.
type ChangeFeed interface {
	// Watch calls fn for every change applied to the local replica, in
	// apply order, from the store's apply goroutine: fn must not block and
	// must not call the store or a cancel func. cancel stops the calls;
	// after it returns fn is not running and is not called again.
	Watch(fn func(Change)) (cancel func())
}
