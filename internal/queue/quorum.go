package queue

import "sort"

// The quorum kind (kind.go): a quorum queue's answers where the message
// kinds differ, as the RabbitMQ version the vhost's profile follows has
// them (Features.CountFailedOnly, Features.QuorumPriorities):
//
//   - a redelivery carries x-delivery-count, the deliveries before it;
//     counting failed deliveries only (4.3), x-delivery-count is the
//     failed ones and x-acquired-count every earlier one;
//   - counting failed deliveries only, a requeue counts as a failure
//     unless it is a return (basic.nack with requeue, basic.recover), a
//     delivery still out when the queue stopped counts as one (its
//     channel was lost), and the delivery limit compares the failures;
//   - priorities are none (3.13: as a classic queue without
//     x-max-priority), two levels (4.0 to 4.2) or strict levels 0 to 31
//     (4.3), and the messages consumers returned are served first, by
//     offset, whatever their priority, as rabbit_fifo serves its returns
//     before its messages.

// QuorumPriorities is how a quorum queue orders messages by priority
// (Features.QuorumPriorities), which differs by RabbitMQ version.
type QuorumPriorities uint8

const (
	// NoQuorumPriorities: priorities are ignored (RabbitMQ 3.13).
	NoQuorumPriorities QuorumPriorities = iota
	// TwoLevelPriorities: priority 5 and above is high, the rest (none
	// included) normal; every third message is the older of the two
	// levels' heads, the others high when there is one, so high messages
	// get about two turns for each normal one (RabbitMQ 4.0 to 4.2,
	// rabbit_fifo_q).
	TwoLevelPriorities
	// StrictPriorities: levels 0 to 31, higher first, above 31 counted as
	// 31, without x-max-priority (RabbitMQ 4.3).
	StrictPriorities
)

// maxStrictPriority is the highest level of StrictPriorities.
const maxStrictPriority = 31

// quorum is the kind of quorum queues; it is the state's holder's, as the
// actor's own state is.
type quorum struct {
	messages
	failedOnly  bool // count failed deliveries only (4.3)
	priorities  QuorumPriorities
	maxPriority uint8 // x-max-priority, should the profile let one through
	dequeues    uint8 // takes modulo 3, for TwoLevelPriorities (nextReturned)
}

func (k *quorum) byPriority() bool {
	return k.priorities != NoQuorumPriorities || k.maxPriority > 0
}

// level returns the priority level of the waiting message at offset: for
// two levels 1 (high) or 0.
func (k *quorum) level(offset uint64) uint8 {
	p := k.q.waiting[offset].rec.Priority
	switch k.priorities {
	case TwoLevelPriorities:
		if p > 4 {
			return 1
		}
		return 0
	case StrictPriorities:
		return min(p, maxStrictPriority)
	}
	return min(p, k.maxPriority)
}

// cmpReturned serves the returns first, by offset; then the rest by
// level, highest first, then by offset.
func (k *quorum) cmpReturned(a, b uint64) int {
	w := k.q.waiting
	if k.priorities != NoQuorumPriorities {
		if ra, rb := w[a].count > 0, w[b].count > 0; ra != rb {
			if ra {
				return -1
			}
			return 1
		} else if ra {
			return cmpOffset(a, b)
		}
	}
	if k.byPriority() {
		if c := cmpLevels(k.level(a), k.level(b)); c != 0 {
			return c
		}
	}
	return cmpOffset(a, b)
}

// nextReturned returns the head, but for two levels on every third take,
// which serves the older of the high and normal heads (rabbit_fifo_q's
// next/1 with its weight of 2).
func (k *quorum) nextReturned() int {
	if k.priorities != TwoLevelPriorities {
		return 0
	}
	q := k.q
	head := q.returned[0]
	if q.waiting[head].count > 0 {
		return 0 // a return: rabbit_fifo serves those apart, uncounted
	}
	turn := k.dequeues == 2
	k.dequeues = (k.dequeues + 1) % 3
	if !turn || k.level(head) == 0 {
		return 0
	}
	// The set is returns, then high, then normal: find the normal head.
	j := sort.Search(len(q.returned), func(i int) bool {
		off := q.returned[i]
		return q.waiting[off].count == 0 && k.level(off) == 0
	})
	if j == len(q.returned) || q.returned[j] > head {
		return 0
	}
	return j
}

// requeued counts a failed requeue as a failure, when only those count.
func (k *quorum) requeued(ds []*delivery, failed bool) {
	if failed && k.failedOnly {
		for _, d := range ds {
			d.failed++
		}
	}
}

// lostAtStop counts the lost channel as a failure, when only those count.
func (k *quorum) lostAtStop(failed uint32) uint32 {
	if k.failedOnly {
		return failed + 1
	}
	return failed
}

func (k *quorum) limitCount(d *delivery) uint32 {
	if k.failedOnly {
		return d.failed
	}
	return d.count
}

// redelivery adds the delivery counts to the properties.
func (k *quorum) redelivery(props []byte, failed, count uint32) []byte {
	if k.failedOnly {
		return withDeliveryCounts(props, failed, count)
	}
	return withDeliveryCount(props, count)
}
