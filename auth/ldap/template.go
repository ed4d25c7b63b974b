package ldap

import (
	"regexp"
	"strings"
	"unicode/utf8"

	goldap "github.com/go-ldap/ldap/v3"
)

// vars are the values a template's ${name} placeholders stand for, as
// RabbitMQ names them: username, user_dn, vhost, resource, name,
// permission, routing_key.
type vars map[string]string

// sink says where a filled template goes, which decides how each
// substituted value is escaped.
type sink uint8

const (
	// sinkDN: a distinguished name; values are escaped as RFC 4514
	// attribute values, except user_dn, which already is a whole DN (as
	// RabbitMQ's rabbit_ldap_rfc4514:fill_dn does).
	sinkDN sink = iota
	// sinkString: a plain string compared by equals or matched by match;
	// values go in unchanged.
	sinkString
	// sinkRegexp: the regular expression of match; values are quoted
	// (regexp.QuoteMeta) so that a name can only match itself.
	sinkRegexp
)

// fill substitutes vars into template for sink s. A placeholder naming
// no known variable is left as written, as RabbitMQ leaves it.
func fill(template string, v vars, s sink) string {
	if !strings.Contains(template, "${") {
		return template
	}
	var b strings.Builder
	for {
		i := strings.Index(template, "${")
		if i < 0 {
			b.WriteString(template)
			return b.String()
		}
		j := strings.IndexByte(template[i:], '}')
		if j < 0 {
			b.WriteString(template)
			return b.String()
		}
		name := template[i+2 : i+j]
		val, ok := v[name]
		b.WriteString(template[:i])
		switch {
		case !ok:
			b.WriteString(template[i : i+j+1])
		case s == sinkDN && name != "user_dn":
			b.WriteString(EscapeDNValue(val))
		case s == sinkRegexp:
			b.WriteString(regexp.QuoteMeta(val))
		default:
			b.WriteString(val)
		}
		template = template[i+j+1:]
	}
}

// EscapeDNValue escapes s for use as an attribute value in a
// distinguished name (RFC 4514 section 2.4): the characters
// " + , ; < > \ and = with a backslash, NUL as \00, a leading space or #
// and a trailing space with a backslash. A user name escaped by it is
// always exactly one attribute value: a ',' or '+' in it cannot add an
// RDN or move the DN into another subtree.
func EscapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0:
			b.WriteString(`\00`)
		case c == '"', c == '+', c == ',', c == ';', c == '<', c == '>', c == '\\', c == '=':
			b.WriteByte('\\')
			b.WriteByte(c)
		case (c == ' ' || c == '#') && i == 0, c == ' ' && i == len(s)-1:
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// EscapeFilterValue escapes s for use as an assertion value in a search
// filter (RFC 4515 section 3): *, (, ), \, NUL and every byte outside
// ASCII become \XX, so a name holding * or )( stays one literal value
// and cannot turn an equality test into a wildcard or add a clause.
func EscapeFilterValue(s string) string { return goldap.EscapeFilter(s) }

// maxName bounds a user name sent to the directory, as Warren's own user
// names are bounded (an AMQP short string): a longer one is refused
// before any DN or filter is built from it.
const maxName = 255

// validName reports whether a user name can be put into a DN or a
// filter: valid UTF-8 (what a DN string is), not empty, at most maxName
// bytes.
func validName(s string) bool { return s != "" && len(s) <= maxName && utf8.ValidString(s) }
