package ldap

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeDir answers from maps: entries (DN -> filters it matches) and
// attribute values; err, when set, is every answer.
type fakeDir struct {
	entries map[string][]string
	attrs   map[string][]string
	err     error
	asked   []string
}

func (d *fakeDir) exists(dn, filter string) (bool, error) {
	d.asked = append(d.asked, dn+" "+filter)
	if d.err != nil {
		return false, d.err
	}
	for _, f := range d.entries[dn] {
		if f == filter {
			return true, nil
		}
	}
	return false, nil
}

func (d *fakeDir) attribute(dn, attr string) ([]string, error) {
	if d.err != nil {
		return nil, d.err
	}
	return d.attrs[dn+" "+attr], nil
}

func (d *fakeDir) search(base string, oneLevel bool, filter string) ([]string, error) {
	return nil, d.err
}

// TestParseQueryErrors: malformed queries are refused with a reason at
// configuration time.
func TestParseQueryErrors(t *testing.T) {
	for _, src := range []string{
		"", "{", "{constant}", "{constant, maybe}", "{in_group}", `{in_group, "cn=g", "mem)ber"}`,
		`{in_group, "cn=g", "a", "b"}`, "{'and', {constant, true}}", "{'or'}", "{frobnicate, true}",
		`{exists, cn}`, `{equals, "a"}`, `{match, "a", {constant, true}}`, `{for, [{permission, read}]}`,
		`{constant, true} extra`, `"just a string"`, `{attribute, "cn=x", "bad attr"}`, `{constant, "true}`,
		`{'not', {constant, true}, {constant, false}}`, `{in_group_nested, "cn=g", "member", everywhere}`,
		`{in_group_nested}`, `{in_group_nested, "cn=g", "mem ber"}`,
	} {
		_, err := ParseQuery(src)
		require.Error(t, err, "%q", src)
	}
	deep := strings.Repeat("{'not', ", 100) + "{constant, true}" + strings.Repeat("}", 100)
	_, err := ParseQuery(deep)
	require.ErrorContains(t, err, "nested too deeply")
	shallow := strings.Repeat("{'not', ", 10) + "{constant, true}" + strings.Repeat("}", 10)
	_, err = ParseQuery(shallow)
	require.NoError(t, err)
}

// TestQueryEval: each query kind, with the variables substituted and
// escaped for where they go.
func TestQueryEval(t *testing.T) {
	dir := &fakeDir{
		entries: map[string][]string{
			"cn=admins,ou=g":     {"(member=cn=alice,ou=p)"},
			`cn=a\,b-users,ou=g`: {"(uniqueMember=cn=alice,ou=p)"},
			"ou=vh1,ou=vhosts":   {"(objectClass=*)"},
		},
		attrs: map[string][]string{
			"cn=alice,ou=p description": {"vh1"},
			"cn=alice,ou=p memberOf":    {"cn=a,ou=g", "cn=wheel,ou=g"},
			"cn=alice,ou=p seeAlso":     {"a.c"},
		},
	}
	v := vars{"username": "alice", "user_dn": "cn=alice,ou=p", "vhost": "vh1", "permission": "read", "name": "alice-q"}
	for _, tc := range []struct {
		src  string
		v    vars
		want bool
	}{
		{"{constant, true}", v, true},
		{"{constant, false}.", v, false},
		{`{in_group, "cn=admins,ou=g"}`, v, true},
		{`{in_group, "cn=others,ou=g"}`, v, false},
		{`{in_group, "cn=${vhost}-users,ou=g", "uniqueMember"}`, vars{"user_dn": "cn=alice,ou=p", "vhost": "a,b"}, true},
		{`{exists, "ou=${vhost},ou=vhosts"}`, v, true},
		{`{exists, "ou=${vhost},ou=vhosts"}`, vars{"vhost": "vh2"}, false},
		{"{'not', {constant, true}}", v, false},
		{"{not, {constant, false}}", v, true},
		{"{'and', [{constant, true}, {constant, false}]}", v, false},
		{"{'and', []}", v, true},
		{"{'or', [{constant, false}, {constant, true}]}", v, true},
		{"{'or', []}", v, false},
		{`{for, [{permission, configure, {constant, false}}, {permission, read, {constant, true}}]}`, v, true},
		{`{equals, "${vhost}", "vh1"}`, v, true},
		{`{equals, {string, "${username}"}, "bob"}`, v, false},
		{`{equals, {attribute, "${user_dn}", "description"}, "${vhost}"}`, v, true},
		{`{equals, {attribute, "${user_dn}", "title"}, ""}`, v, false},
		{`{match, {string, "${name}"}, {string, "^${username}-"}}`, v, true},
		{`{match, "${name}", "^${username}-"}`, vars{"name": "xxy-q", "username": "x*(y)"}, false},
		{`{match, "${name}", "^${username}-"}`, vars{"name": "x*(y)-q", "username": "x*(y)"}, true},
		{`{match, "a", "("}`, v, false},
		// Multi-valued attributes: equals by membership, match any value.
		{`{equals, {attribute, "${user_dn}", "memberOf"}, "cn=wheel,ou=g"}`, v, true},
		{`{equals, {attribute, "${user_dn}", "memberOf"}, "cn=b,ou=g"}`, v, false},
		{`{match, {attribute, "${user_dn}", "memberOf"}, "^cn=wheel,"}`, v, true},
		{`{match, {string, "cn=wheel,ou=g"}, {attribute, "${user_dn}", "memberOf"}}`, v, true},
		{`{match, {string, "abc"}, {attribute, "${user_dn}", "seeAlso"}}`, v, false},
		{`{in_group_nested, "cn=g", "member", singlelevel}`, v, false},
		{`% a comment
		  {constant, true}`, v, true},
	} {
		q, err := ParseQuery(tc.src)
		require.NoError(t, err, tc.src)
		got, err := q.eval(&env{v: tc.v, dir: dir, groupBase: "ou=g"})
		require.NoError(t, err, tc.src)
		require.Equal(t, tc.want, got, tc.src)
		again, err := ParseQuery(q.String())
		require.NoError(t, err)
		require.Equal(t, q.root, again.root)
	}

	// A for with no case for these variables is a configuration error,
	// and a directory error is passed up, never taken as a yes.
	_, err := MustParseQuery(`{for, [{permission, write, {constant, true}}]}`).eval(&env{v: v, dir: dir})
	require.ErrorIs(t, err, errQuery)
	down := errors.New("down")
	got, err := MustParseQuery(`{'or', [{in_group, "cn=admins,ou=g"}, {constant, true}]}`).eval(&env{v: v, dir: &fakeDir{err: down}})
	require.ErrorIs(t, err, down)
	require.False(t, got)
	require.False(t, must(Query{}.eval(&env{})), "the zero Query is false")
}

func must(ok bool, err error) bool {
	if err != nil {
		panic(err)
	}
	return ok
}
