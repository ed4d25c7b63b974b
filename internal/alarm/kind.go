package alarm

import (
	"fmt"

	"github.com/warrenmq/broker/internal/session"
)

// Kind is a set of resource alarms, as bits. The root's public Alarm has
// the same values, so the two convert directly; the connections' gate
// (session.Alarms) numbers its bits separately, and gateBits / ofGate are
// the only places that translate.
type Kind uint8

// The alarm kinds RabbitMQ has.
const (
	Memory Kind = 1 << iota
	Disk

	All = Memory | Disk
)

// String returns "memory" or "disk", the names RabbitMQ gives its resource
// alarms.
func (k Kind) String() string {
	switch k {
	case Memory:
		return "memory"
	case Disk:
		return "disk"
	}
	return fmt.Sprintf("Alarm(%d)", uint8(k))
}

// kindBits pairs each Kind with the session.Alarms bit that blocks
// connections for it.
var kindBits = [...]struct {
	kind Kind
	bit  uint32
}{
	{Memory, session.AlarmMemory},
	{Disk, session.AlarmDisk},
}

// gateBits returns the session.Alarms bit set that raises the alarms in k;
// unknown bits are dropped.
func gateBits(k Kind) uint32 {
	var bits uint32
	for _, m := range kindBits {
		if k&m.kind != 0 {
			bits |= m.bit
		}
	}
	return bits
}

// ofGate is gateBits's inverse: the kinds raised in a session.Alarms bit
// set.
func ofGate(bits uint32) Kind {
	var k Kind
	for _, m := range kindBits {
		if bits&m.bit != 0 {
			k |= m.kind
		}
	}
	return k
}
