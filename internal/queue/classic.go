package queue

// The classic kind (kind.go): a classic queue's answers where the message
// kinds differ. Deliveries all count alike and a redelivery carries no
// count header; x-max-priority (fixed at declare) orders the returned set
// by priority, capped at the maximum, then by offset.

// classic is the kind of classic queues.
type classic struct {
	messages
	maxPriority uint8 // x-max-priority; 0: no priorities
}

func (k classic) byPriority() bool { return k.maxPriority > 0 }

// cmpReturned orders by priority, highest first, then lowest offset.
func (k classic) cmpReturned(a, b uint64) int {
	if k.maxPriority > 0 {
		if c := cmpLevels(min(k.q.waiting[a].rec.Priority, k.maxPriority), min(k.q.waiting[b].rec.Priority, k.maxPriority)); c != 0 {
			return c
		}
	}
	return cmpOffset(a, b)
}

// nextReturned is the head: the set is in serving order.
func (classic) nextReturned() int { return 0 }

// requeued counts nothing more: every delivery counted when it went out.
func (classic) requeued([]*delivery, bool) {}

// lostAtStop counts nothing more, as requeued.
func (classic) lostAtStop(failed uint32) uint32 { return failed }

func (classic) limitCount(d *delivery) uint32 { return d.count }

// redelivery leaves the properties as published.
func (classic) redelivery(props []byte, _, _ uint32) []byte { return props }
