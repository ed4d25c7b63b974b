package broker

import "github.com/warrenmq/broker/internal/testhook"

// init fills in internal/testhook's hooks: the operations only tests call,
// which brokertest offers and Broker does not export.
func init() {
	testhook.ForceConsumerTimeout = func(b any, id string, ch uint16) error {
		return b.(*Broker).forceConsumerTimeout(id, ch)
	}
	testhook.RaiseAlarm = func(b, kind any) { b.(*Broker).raiseAlarm(kind.(Alarm)) }
	testhook.ClearAlarm = func(b, kind any) { b.(*Broker).clearAlarm(kind.(Alarm)) }
}
