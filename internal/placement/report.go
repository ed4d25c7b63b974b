package placement

import (
	"encoding/json"
	"time"

	"github.com/warrenmq/broker/meta"
)

// reportPrefix starts the status records, inside the leases' key space
// ('p') but apart from them: a link's name never starts with 0.
var reportPrefix = []byte{keyPrefix, 0}

func reportKey(name string) []byte { return append(append([]byte(nil), reportPrefix...), name...) }

// reportValue is a status record: the holding member, its wall clock
// when it wrote the record, and what the link reported.
type reportValue struct {
	Node   string          `json:"node"`
	At     int64           `json:"at"` // Unix nanoseconds, the writer's clock
	Status json.RawMessage `json:"status"`
	// Served is the restart request count the holder has served
	// (restart.go).
	Served uint64 `json:"served,omitempty"`
}

// withReport is the records an acquisition or renewal sets: the lease
// record, and name's status record when report is not nil or a restart
// was served (whose count it carries).
func (l *Lease) withReport(name string, report func() []byte, served uint64, lease meta.Record) []meta.Record {
	if report == nil && served == 0 {
		return []meta.Record{lease}
	}
	var st []byte
	if report != nil {
		st = report()
	}
	if !json.Valid(st) {
		st = []byte("null")
	}
	v, _ := json.Marshal(reportValue{Node: l.member, At: time.Now().UnixNano(), Status: st, Served: served})
	return []meta.Record{lease, {Key: reportKey(name), Value: v}}
}

// Reported returns name's status as its holder stored it in this
// member's replica, and that member; false when none is stored, when
// this member wrote it (what runs here has a fresher status), or the
// record is older than the lease's TTL by this member's clock (its
// holder stopped renewing: it died or lost the store, and the link is
// about to run elsewhere). It never waits on another member; comparing
// the writer's clock with this one's assumes clocks synchronised within
// a TTL.
func (l *Lease) Reported(name string) (node string, status []byte, ok bool) {
	v := l.read(reportKey(name))
	if v == nil {
		return "", nil, false
	}
	var rv reportValue
	if json.Unmarshal(v, &rv) != nil || rv.Node == l.member || time.Since(time.Unix(0, rv.At)) > l.ttl {
		return "", nil, false
	}
	return rv.Node, rv.Status, true
}
