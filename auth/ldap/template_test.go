package ldap

import (
	"regexp"
	"testing"

	ber "github.com/go-asn1-ber/asn1-ber"
	goldap "github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"
)

// TestFill: each sink escapes the substituted values its own way, and
// user_dn goes into a DN as it is.
func TestFill(t *testing.T) {
	v := vars{"username": "a,b*(c)", "user_dn": "cn=x,dc=y", "vhost": " #v "}
	for _, tc := range []struct {
		tmpl string
		s    sink
		want string
	}{
		{"cn=${username},ou=People", sinkDN, `cn=a\,b*(c),ou=People`},
		{"${user_dn}", sinkDN, "cn=x,dc=y"},
		{"cn=${vhost}-users", sinkDN, `cn=\ #v\ -users`},
		{"${username}", sinkString, "a,b*(c)"},
		{"^${username}-", sinkRegexp, `^a,b\*\(c\)-`},
		{"${unknown} ${username", sinkString, "${unknown} ${username"},
		{"plain", sinkDN, "plain"},
		{"${username}${username}", sinkString, "a,b*(c)a,b*(c)"},
	} {
		require.Equal(t, tc.want, fill(tc.tmpl, v, tc.s), tc.tmpl)
	}
}

// TestEscapeDNValue: RFC 4514's specials, NUL, and leading/trailing
// spaces and a leading #.
func TestEscapeDNValue(t *testing.T) {
	for in, want := range map[string]string{
		"alice":     "alice",
		"a,b":       `a\,b`,
		`a\,b`:      `a\\\,b`,
		"a+b=c":     `a\+b\=c`,
		`"<>;`:      `\"\<\>\;`,
		" a ":       `\ a\ `,
		"#a#":       `\#a#`,
		"a\x00":     `a\00`,
		"é":         "é",
		"a b":       "a b",
		" ":         `\ `,
		"":          "",
		"*)(uid=*":  `*)(uid\=*`,
		"cn=x,dc=y": `cn\=x\,dc\=y`,
	} {
		require.Equal(t, want, EscapeDNValue(in), "%q", in)
	}
}

// TestEscapeFilterValue: RFC 4515's specials become \XX.
func TestEscapeFilterValue(t *testing.T) {
	require.Equal(t, `\2a\29\28uid=\2a`, EscapeFilterValue("*)(uid=*"))
	require.Equal(t, `a\5cb\00`, EscapeFilterValue("a\\b\x00"))
}

// checkEscapes is the fuzz target's property for one user name u: in a
// DN it is exactly the value of the first RDN, in a filter exactly the
// assertion value of one equality test, in a regular expression it
// matches exactly itself.
func checkEscapes(t *testing.T, u string) {
	if !validName(u) {
		return
	}
	dnStr := fill("cn=${username},ou=People,dc=example,dc=com", vars{"username": u}, sinkDN)
	dn, err := goldap.ParseDN(dnStr)
	require.NoError(t, err, "%q -> %q", u, dnStr)
	require.Len(t, dn.RDNs, 4, "%q -> %q", u, dnStr)
	require.Len(t, dn.RDNs[0].Attributes, 1, "%q -> %q", u, dnStr)
	require.Equal(t, "cn", dn.RDNs[0].Attributes[0].Type)
	require.Equal(t, u, dn.RDNs[0].Attributes[0].Value, "%q -> %q", u, dnStr)

	filter := "(uid=" + EscapeFilterValue(u) + ")"
	p, err := goldap.CompileFilter(filter)
	require.NoError(t, err, "%q -> %q", u, filter)
	require.Equal(t, ber.Tag(goldap.FilterEqualityMatch), p.Tag, "%q -> %q", u, filter)
	require.Len(t, p.Children, 2)
	require.Equal(t, "uid", p.Children[0].Data.String())
	require.Equal(t, u, p.Children[1].Data.String(), "%q -> %q", u, filter)

	rx, err := regexp.Compile("^" + fill("${username}", vars{"username": u}, sinkRegexp) + "$")
	require.NoError(t, err)
	require.True(t, rx.MatchString(u))
	require.False(t, rx.MatchString(u+"x"))
}

// FuzzEscape: checkEscapes for any user name; the term parser never
// panics and what it reads prints back to the same term; ParseQuery
// never panics.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"alice", "*", "*)(uid=*", "a,b+c", " #x ", `a\,b`, "é\x00", "x*(y)", ".*", "cn=x,dc=y",
		`{in_group, "cn=${username},ou=g"}`, `{'or', [{constant, true}, {match, "${name}", "^${username}-"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkEscapes(t, s)
		_, _ = ParseQuery(s)
		p := &termParser{s: s}
		tm, err := p.term()
		if err != nil {
			return
		}
		again := &termParser{s: tm.String()}
		tm2, err := again.term()
		require.NoError(t, err, "%q printed as %q", s, tm.String())
		require.Equal(t, tm, tm2, "%q printed as %q", s, tm.String())
	})
}

// TestUserVars: DOMAIN\user gives ad_domain and ad_user, split at the
// first backslash; other names give only username.
func TestUserVars(t *testing.T) {
	require.Equal(t, vars{"username": `CORP\alice`, "ad_domain": "CORP", "ad_user": "alice"}, userVars(`CORP\alice`))
	require.Equal(t, vars{"username": `a\b\c`, "ad_domain": "a", "ad_user": `b\c`}, userVars(`a\b\c`))
	for _, u := range []string{"alice", `\alice`, `alice\`, `\`} {
		require.Equal(t, vars{"username": u}, userVars(u), u)
	}
}
