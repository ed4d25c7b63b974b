package amqp

import (
	"encoding/binary"
	"time"
)

// ContentHeader is a parsed content header frame payload (spec §4.2.6.1).
type ContentHeader struct {
	ClassID  uint16
	BodySize uint64
	// Properties is the raw property flags and list, aliasing the parsed payload. The
	// broker stores and forwards it unchanged; DecodeProperties or SummarizeProperties
	// read it.
	Properties []byte
}

// ParseContentHeader parses a header frame payload and checks that the property flags
// and list are well formed (for class basic; other classes carry no content). It does
// not allocate. Malformed input returns a *Error with code SyntaxError. The weight
// field is unused by the spec and ignored.
func ParseContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < 14 {
		return ContentHeader{}, syntaxErrorf("content header of %d octets is truncated", len(payload))
	}
	h := ContentHeader{
		ClassID:    binary.BigEndian.Uint16(payload),
		BodySize:   binary.BigEndian.Uint64(payload[4:]),
		Properties: payload[12:],
	}
	if _, err := scanProperties(h.Properties, nil); err != nil {
		return ContentHeader{}, err
	}
	return h, nil
}

// Properties are the 14 content properties of class basic (spec §1.8, amqp091-go's
// Publishing fields). A zero field is absent: Append does not send it.
type Properties struct {
	ContentType     string    // MIME content type
	ContentEncoding string    // MIME content encoding
	Headers         Table     // application headers; sent when non-empty
	DeliveryMode    uint8     // 1 transient, 2 persistent
	Priority        uint8     // 0 to 9
	CorrelationID   string    // application correlation identifier
	ReplyTo         string    // address to reply to
	Expiration      string    // per-message TTL in milliseconds, as a decimal string
	MessageID       string    // application message identifier
	Timestamp       time.Time // message timestamp, whole seconds; sent when not IsZero
	Type            string    // message type name
	UserID          string    // creating user id, checked against the connection's user
	AppID           string    // creating application id
	ClusterID       string    // the spec's "reserved" property, once cluster-id
}

// Property flag bits (spec §4.2.6.1): the first property is the most significant bit,
// bit 0 says that another flag word follows.
const (
	flagContentType     = 0x8000
	flagContentEncoding = 0x4000
	flagHeaders         = 0x2000
	flagDeliveryMode    = 0x1000
	flagPriority        = 0x0800
	flagCorrelationID   = 0x0400
	flagReplyTo         = 0x0200
	flagExpiration      = 0x0100
	flagMessageID       = 0x0080
	flagTimestamp       = 0x0040
	flagType            = 0x0020
	flagUserID          = 0x0010
	flagAppID           = 0x0008
	flagClusterID       = 0x0004
	flagContinuation    = 0x0001
)

// Append appends the property flags and the present properties. Strings longer than
// 255 bytes are cut, header values that cannot be encoded become void (see
// Table.Validate).
func (p *Properties) Append(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0)
	var flags uint16
	str := func(flag uint16, s string) {
		if s != "" {
			flags |= flag
			dst = appendShortstr(dst, s)
		}
	}
	str(flagContentType, p.ContentType)
	str(flagContentEncoding, p.ContentEncoding)
	if len(p.Headers) > 0 {
		flags |= flagHeaders
		dst = appendTableLenient(dst, p.Headers)
	}
	if p.DeliveryMode != 0 {
		flags |= flagDeliveryMode
		dst = append(dst, p.DeliveryMode)
	}
	if p.Priority != 0 {
		flags |= flagPriority
		dst = append(dst, p.Priority)
	}
	str(flagCorrelationID, p.CorrelationID)
	str(flagReplyTo, p.ReplyTo)
	str(flagExpiration, p.Expiration)
	str(flagMessageID, p.MessageID)
	if !p.Timestamp.IsZero() {
		flags |= flagTimestamp
		dst = appendUint64(dst, uint64(p.Timestamp.Unix()))
	}
	str(flagType, p.Type)
	str(flagUserID, p.UserID)
	str(flagAppID, p.AppID)
	str(flagClusterID, p.ClusterID)
	binary.BigEndian.PutUint16(dst[start:], flags)
	return dst
}

// DecodeProperties decodes raw property flags and list. Strings are copied, the result
// never aliases raw. Malformed input returns a *Error with code SyntaxError.
func DecodeProperties(raw []byte) (Properties, error) {
	var p Properties
	_, err := scanProperties(raw, &p)
	return p, err
}

// SetHeaders returns raw encoded properties with the headers in set added
// or replaced, the others kept; raw itself is not modified. Properties
// that do not decode are returned as they are: the broker adds headers
// only to properties it accepted, so this never loses a message.
func SetHeaders(raw []byte, set Table) []byte {
	p, err := DecodeProperties(raw)
	if err != nil {
		return raw
	}
	h := make(Table, len(p.Headers)+len(set))
	for k, v := range p.Headers {
		h[k] = v
	}
	for k, v := range set {
		h[k] = v
	}
	p.Headers = h
	return p.Append(nil)
}

// PropertySummary is what the publish path needs from the properties without
// decoding them: persistence, priority, the per-message TTL, whether there are headers
// (headers exchanges and dead-lettering look at them), and the claimed user id.
type PropertySummary struct {
	DeliveryMode uint8
	Priority     uint8
	Expiration   string
	HasHeaders   bool
	UserID       string
}

// SummarizeProperties scans raw property flags and list, validating all of it. It
// allocates nothing except the Expiration and UserID strings when they are present.
// Malformed input returns a *Error with code SyntaxError.
func SummarizeProperties(raw []byte) (PropertySummary, error) {
	return scanProperties(raw, nil)
}

// scanProperties validates raw and returns its summary; with p non-nil it also
// decodes every property into p. Decoding copies raw into one string once and every
// string property (and the headers' keys and strings) is a substring of it: one
// allocation instead of one per string.
func scanProperties(raw []byte, p *Properties) (PropertySummary, error) {
	var s PropertySummary
	d := propDecoder{src: raw}
	if p != nil {
		d.str = string(raw)
	}
	// Flag words: bit 0 chains another word. Class basic defines 14 properties, so
	// further words may only be empty continuations.
	flags := d.short()
	for w := flags; d.err == nil && w&flagContinuation != 0; {
		if w = d.short(); w&^flagContinuation != 0 {
			return PropertySummary{}, syntaxErrorf("property flags name properties class basic does not define")
		}
	}
	if d.err != nil {
		return PropertySummary{}, d.err
	}
	// With p nil, the properties the summary does not need are validated and skipped.
	var skip Properties
	target := p
	if target == nil {
		target = &skip
	}
	str := func(flag uint16, dst *string, wanted bool) {
		if flags&flag == 0 {
			return
		}
		if !wanted {
			dst = nil
		}
		d.shortstr(dst)
	}
	str(flagContentType, &target.ContentType, p != nil)
	str(flagContentEncoding, &target.ContentEncoding, p != nil)
	if flags&flagHeaders != 0 {
		s.HasHeaders = true
		if d.err == nil {
			var shared string
			if p != nil {
				shared = d.str[d.off:]
			}
			t, n, err := parseTableShared(d.src[d.off:], shared, 0, p != nil)
			if err != nil {
				if e, ok := err.(*Error); ok {
					return PropertySummary{}, syntaxErrorf("headers property: %s", e.detail())
				}
				return PropertySummary{}, err
			}
			target.Headers = t
			d.off += n
		}
	}
	if flags&flagDeliveryMode != 0 {
		s.DeliveryMode = d.octet()
	}
	if flags&flagPriority != 0 {
		s.Priority = d.octet()
	}
	str(flagCorrelationID, &target.CorrelationID, p != nil)
	str(flagReplyTo, &target.ReplyTo, p != nil)
	str(flagExpiration, &s.Expiration, true)
	str(flagMessageID, &target.MessageID, p != nil)
	var timestamp uint64
	if flags&flagTimestamp != 0 {
		timestamp = d.longlong()
	}
	str(flagType, &target.Type, p != nil)
	str(flagUserID, &s.UserID, true)
	str(flagAppID, &target.AppID, p != nil)
	str(flagClusterID, &target.ClusterID, p != nil)
	if d.err != nil {
		return PropertySummary{}, d.err
	}
	if d.off != len(raw) {
		return PropertySummary{}, syntaxErrorf("%d trailing octets after the content properties", len(raw)-d.off)
	}
	if p != nil {
		p.DeliveryMode = s.DeliveryMode
		p.Priority = s.Priority
		p.Expiration = s.Expiration
		p.UserID = s.UserID
		if flags&flagTimestamp != 0 {
			p.Timestamp = time.Unix(int64(timestamp), 0).UTC()
		}
	}
	return s, nil
}

// propDecoder reads property values; the first failure sticks.
type propDecoder struct {
	src []byte
	str string // string(src) when decoding, so strings can be substrings of it
	off int
	err error
}

func (d *propDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.src)-d.off < n {
		d.err = syntaxErrorf("truncated content properties")
		return nil
	}
	b := d.src[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

func (d *propDecoder) octet() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *propDecoder) short() uint16 {
	if b := d.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *propDecoder) longlong() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// shortstr reads a short string into *dst, or only skips it when dst is nil.
func (d *propDecoder) shortstr(dst *string) {
	n := d.take(1)
	if n == nil {
		return
	}
	start := d.off
	b := d.take(int(n[0]))
	if b == nil || dst == nil {
		return
	}
	if d.str != "" {
		*dst = d.str[start : start+len(b)]
	} else {
		*dst = string(b)
	}
}
