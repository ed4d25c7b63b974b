package ldap

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	goldap "github.com/go-ldap/ldap/v3"
)

// Query is a parsed RabbitMQ LDAP query (rabbitmq_auth_backend_ldap's
// vhost_access_query, resource_access_query, topic_access_query and each
// of tag_queries), written as in RabbitMQ's advanced.config:
//
//	{constant, true}
//	{in_group, "cn=${vhost}-users,ou=groups,dc=example,dc=com"}
//	{in_group, "cn=admins,ou=groups,dc=example,dc=com", "uniqueMember"}
//	{in_group_nested, "cn=admins,ou=groups,dc=example,dc=com"}
//	{in_group_nested, DN, "member", single_level}
//	{exists, "ou=${vhost},ou=vhosts,dc=example,dc=com"}
//	{'not', Q}  {'and', [Q, ...]}  {'or', [Q, ...]}
//	{for, [{permission, configure, Q}, {resource, queue, Q}, ...]}
//	{equals, S1, S2}  {match, S, RE}
//
// where S is a string: "text with ${variables}", {string, "..."} or
// {attribute, "DN pattern", "attributeName"}. The zero Query is
// {constant, false}.
type Query struct {
	src  string
	root boolNode
}

// String is the query as written (re-parsable).
func (q Query) String() string {
	if q.root == nil {
		return "{constant, false}"
	}
	return q.src
}

// directory is what evaluating a query asks of the LDAP server: a
// base-object search of dn with filter (whether the entry exists and
// matches), the values of one attribute of the entry dn, and a search
// for the DNs of matching entries.
type directory interface {
	exists(dn, filter string) (bool, error)
	attribute(dn, attr string) (values []string, err error)
	// search returns the DNs of the entries under base (subtree, or one
	// level when oneLevel) that match filter.
	search(base string, oneLevel bool, filter string) ([]string, error)
}

// env is one evaluation: the variables and the user's DN (user_dn is
// also among the variables).
type env struct {
	v   vars
	dir directory
	// groupBase is where in_group_nested searches for groups
	// (group_lookup_base, else dn_lookup_base).
	groupBase string
}

// errQuery wraps a query that cannot be evaluated with these variables
// (a for with no matching case): a configuration error, not a refusal.
var errQuery = errors.New("ldap: query")

// eval decides q in e. An error means the directory could not answer.
func (q Query) eval(e *env) (bool, error) {
	if q.root == nil {
		return false, nil
	}
	return q.root.test(e)
}

type boolNode interface {
	test(e *env) (bool, error)
}

// strNode yields the strings of a string query: one for a template,
// each value of an attribute (none when it is absent, which makes equals
// and match false, as RabbitMQ's safe_eval does).
type strNode interface {
	strs(e *env, s sink) ([]string, error)
}

type constNode bool

func (c constNode) test(*env) (bool, error) { return bool(c), nil }

type existsNode struct{ dn string }

func (n existsNode) test(e *env) (bool, error) {
	return e.dir.exists(fill(n.dn, e.v, sinkDN), "(objectClass=*)")
}

// inGroupNode is {in_group, DN, Attr}: the group entry DN exists and its
// attribute Attr (member by default) holds the user's DN.
type inGroupNode struct{ dn, attr string }

func (n inGroupNode) test(e *env) (bool, error) {
	filter := "(" + n.attr + "=" + EscapeFilterValue(e.v["user_dn"]) + ")"
	return e.dir.exists(fill(n.dn, e.v, sinkDN), filter)
}

// inGroupNestedNode is {in_group_nested, DN, Attr, Scope}: the user is a
// member of group DN directly or through groups that are members of it.
// Starting from the user's DN it searches the group lookup base for the
// groups whose Attr holds the DNs found so far, level by level, until DN
// is among them (RabbitMQ's breadth-first walk); cycles end the walk.
type inGroupNestedNode struct {
	dn, attr string
	oneLevel bool
}

// maxNestedGroups bounds the groups one in_group_nested walks, so a
// directory with huge or cyclic nesting cannot hold a login.
const maxNestedGroups = 1000

func (n inGroupNestedNode) test(e *env) (bool, error) {
	if e.groupBase == "" {
		return false, fmt.Errorf("%w: in_group_nested needs group_lookup_base or dn_lookup_base", errQuery)
	}
	target, err := goldap.ParseDN(fill(n.dn, e.v, sinkDN))
	if err != nil {
		return false, nil
	}
	seen := map[string]bool{}
	frontier := []string{e.v["user_dn"]}
	for len(frontier) > 0 {
		var next []string
		for _, member := range frontier {
			groups, err := e.dir.search(e.groupBase, n.oneLevel, "("+n.attr+"="+EscapeFilterValue(member)+")")
			if err != nil {
				return false, err
			}
			for _, g := range groups {
				key := strings.ToLower(g)
				if seen[key] {
					continue
				}
				seen[key] = true
				if d, err := goldap.ParseDN(g); err == nil && d.EqualFold(target) {
					return true, nil
				}
				if len(seen) > maxNestedGroups {
					return false, fmt.Errorf("%w: in_group_nested: more than %d groups", errQuery, maxNestedGroups)
				}
				next = append(next, g)
			}
		}
		frontier = next
	}
	return false, nil
}

type notNode struct{ q boolNode }

func (n notNode) test(e *env) (bool, error) {
	ok, err := n.q.test(e)
	return !ok, err
}

type andNode []boolNode

func (n andNode) test(e *env) (bool, error) {
	for _, q := range n {
		if ok, err := q.test(e); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

type orNode []boolNode

func (n orNode) test(e *env) (bool, error) {
	for _, q := range n {
		if ok, err := q.test(e); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

type forCase struct {
	name, value string
	q           boolNode
}

// forNode is {for, [{Var, Value, Q}, ...]}: the first case whose variable
// has that value decides.
type forNode []forCase

func (n forNode) test(e *env) (bool, error) {
	for _, c := range n {
		v, ok := e.v[c.name]
		if !ok {
			return false, fmt.Errorf("%w: for: no variable %q here", errQuery, c.name)
		}
		if v == c.value {
			return c.q.test(e)
		}
	}
	return false, fmt.Errorf("%w: for: no case matches", errQuery)
}

// equalsNode is {equals, S1, S2}: some value of S1 equals some value of
// S2 (RabbitMQ compares a multi-valued attribute by membership).
type equalsNode struct{ a, b strNode }

func (n equalsNode) test(e *env) (bool, error) {
	as, err := n.a.strs(e, sinkString)
	if err != nil {
		return false, err
	}
	bs, err := n.b.strs(e, sinkString)
	if err != nil {
		return false, err
	}
	for _, a := range as {
		for _, b := range bs {
			if a == b {
				return true, nil
			}
		}
	}
	return false, nil
}

// matchNode is {match, S, RE}: some value of RE (RE2 syntax, unanchored
// as Erlang's re:run is) matches some value of S. Values substituted into
// RE, and attribute values used as RE, are quoted, so a user name can
// match only itself.
type matchNode struct{ s, re strNode }

func (n matchNode) test(e *env) (bool, error) {
	ss, err := n.s.strs(e, sinkString)
	if err != nil {
		return false, err
	}
	res, err := n.re.strs(e, sinkRegexp)
	if err != nil {
		return false, err
	}
	for _, re := range res {
		rx, err := regexp.Compile(re)
		if err != nil {
			// RabbitMQ's safe_eval: a sub-evaluation that fails is false.
			continue
		}
		for _, s := range ss {
			if rx.MatchString(s) {
				return true, nil
			}
		}
	}
	return false, nil
}

type stringNode struct{ pattern string }

func (n stringNode) strs(e *env, s sink) ([]string, error) {
	return []string{fill(n.pattern, e.v, s)}, nil
}

// attributeNode is {attribute, DN, Attr}: the values of attribute Attr
// of entry DN.
type attributeNode struct{ dn, attr string }

func (n attributeNode) strs(e *env, s sink) ([]string, error) {
	vs, err := e.dir.attribute(fill(n.dn, e.v, sinkDN), n.attr)
	if s == sinkRegexp {
		for i, v := range vs {
			vs[i] = regexp.QuoteMeta(v)
		}
	}
	return vs, err
}

// ParseQuery parses a query written as in RabbitMQ's advanced.config
// (see Query). Attribute names are checked (letters, digits and '-', or
// a numeric OID) since they are put into search filters as written.
func ParseQuery(src string) (Query, error) {
	p := &termParser{s: src}
	t, err := p.term()
	if err != nil {
		return Query{}, fmt.Errorf("ldap: query %q: %w", src, err)
	}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++ // advanced.config terms may end with a full stop
		p.space()
	}
	if p.i != len(p.s) {
		return Query{}, fmt.Errorf("ldap: query %q: unexpected %q at offset %d", src, p.s[p.i:], p.i)
	}
	root, err := boolQuery(t, 0)
	if err != nil {
		return Query{}, fmt.Errorf("ldap: query %q: %w", src, err)
	}
	return Query{src: strings.TrimSpace(src), root: root}, nil
}

// MustParseQuery is ParseQuery for queries written in the program; it
// panics on an error.
func MustParseQuery(src string) Query {
	q, err := ParseQuery(src)
	if err != nil {
		panic(err)
	}
	return q
}

// maxDepth bounds query nesting, so a hostile configuration string
// cannot exhaust the stack.
const maxDepth = 32

// boolQuery turns a parsed term into a query that decides, checking
// each form's arguments so a mistake fails at configuration time.
func boolQuery(t term, depth int) (boolNode, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deeply")
	}
	tup, ok := t.(tuple)
	if !ok || len(tup) == 0 {
		return nil, fmt.Errorf("want a query tuple, got %s", t)
	}
	tag, ok := tup[0].(atom)
	if !ok {
		return nil, fmt.Errorf("want a query name, got %s", tup[0])
	}
	args := tup[1:]
	switch tag {
	case "constant":
		if len(args) == 1 {
			switch args[0] {
			case atom("true"):
				return constNode(true), nil
			case atom("false"):
				return constNode(false), nil
			}
		}
		return nil, errors.New("constant takes true or false")
	case "exists":
		if len(args) == 1 {
			if dn, ok := args[0].(str); ok {
				return existsNode{string(dn)}, nil
			}
		}
		return nil, errors.New("exists takes a DN pattern")
	case "in_group":
		if len(args) < 1 || len(args) > 2 {
			return nil, errors.New("in_group takes a DN pattern and optionally an attribute")
		}
		dn, ok := args[0].(str)
		if !ok {
			return nil, errors.New("in_group takes a DN pattern")
		}
		attr := "member"
		if len(args) == 2 {
			a, ok := args[1].(str)
			if !ok || !validAttr(string(a)) {
				return nil, fmt.Errorf("in_group: bad attribute name %s", args[1])
			}
			attr = string(a)
		}
		return inGroupNode{string(dn), attr}, nil
	case "in_group_nested":
		if len(args) < 1 || len(args) > 3 {
			return nil, errors.New("in_group_nested takes a DN pattern, optionally an attribute and a scope")
		}
		dn, ok := args[0].(str)
		if !ok {
			return nil, errors.New("in_group_nested takes a DN pattern")
		}
		n := inGroupNestedNode{dn: string(dn), attr: "member"}
		if len(args) >= 2 {
			a, ok := args[1].(str)
			if !ok || !validAttr(string(a)) {
				return nil, fmt.Errorf("in_group_nested: bad attribute name %s", args[1])
			}
			n.attr = string(a)
		}
		if len(args) == 3 {
			switch args[2] {
			case atom("subtree"):
			case atom("single_level"), atom("singlelevel"), atom("one_level"), atom("onelevel"):
				n.oneLevel = true
			default:
				return nil, fmt.Errorf("in_group_nested: scope is subtree or single_level, not %s", args[2])
			}
		}
		return n, nil
	case "not":
		if len(args) != 1 {
			return nil, errors.New("not takes one query")
		}
		q, err := boolQuery(args[0], depth+1)
		return notNode{q}, err
	case "and", "or":
		if len(args) != 1 {
			return nil, fmt.Errorf("%s takes a list of queries", tag)
		}
		l, ok := args[0].(list)
		if !ok {
			return nil, fmt.Errorf("%s takes a list of queries", tag)
		}
		qs := make([]boolNode, len(l))
		for i, e := range l {
			q, err := boolQuery(e, depth+1)
			if err != nil {
				return nil, err
			}
			qs[i] = q
		}
		if tag == "and" {
			return andNode(qs), nil
		}
		return orNode(qs), nil
	case "for":
		l, ok := list(nil), false
		if len(args) == 1 {
			l, ok = args[0].(list)
		}
		if !ok {
			return nil, errors.New("for takes a list of {Variable, Value, Query}")
		}
		var cases forNode
		for _, e := range l {
			c, ok := e.(tuple)
			if !ok || len(c) != 3 {
				return nil, fmt.Errorf("for: want {Variable, Value, Query}, got %s", e)
			}
			name, ok := c[0].(atom)
			if !ok {
				return nil, fmt.Errorf("for: want a variable name, got %s", c[0])
			}
			var value string
			switch v := c[1].(type) {
			case atom:
				value = string(v)
			case str:
				value = string(v)
			default:
				return nil, fmt.Errorf("for: want a value, got %s", c[1])
			}
			q, err := boolQuery(c[2], depth+1)
			if err != nil {
				return nil, err
			}
			cases = append(cases, forCase{string(name), value, q})
		}
		return cases, nil
	case "equals", "match":
		if len(args) != 2 {
			return nil, fmt.Errorf("%s takes two strings", tag)
		}
		a, err := strQuery(args[0])
		if err != nil {
			return nil, err
		}
		b, err := strQuery(args[1])
		if err != nil {
			return nil, err
		}
		if tag == "equals" {
			return equalsNode{a, b}, nil
		}
		return matchNode{a, b}, nil
	}
	return nil, fmt.Errorf("unknown query %s", tag)
}

// strQuery turns a term into a string query: a template string,
// {string, S} or {attribute, DN, Attr}.
func strQuery(t term) (strNode, error) {
	switch v := t.(type) {
	case str:
		return stringNode{string(v)}, nil
	case tuple:
		if len(v) == 2 && v[0] == atom("string") {
			if s, ok := v[1].(str); ok {
				return stringNode{string(s)}, nil
			}
		}
		if len(v) == 3 && v[0] == atom("attribute") {
			dn, ok1 := v[1].(str)
			a, ok2 := v[2].(str)
			if ok1 && ok2 && validAttr(string(a)) {
				return attributeNode{string(dn), string(a)}, nil
			}
			return nil, fmt.Errorf("attribute takes a DN pattern and an attribute name, got %s", t)
		}
	}
	return nil, fmt.Errorf("want a string, {string, S} or {attribute, DN, Attr}, got %s", t)
}

// validAttr reports whether a is an attribute description RFC 4512 allows
// as written in a filter: a descriptor (a letter, then letters, digits,
// '-') or a numeric OID.
func validAttr(a string) bool {
	if a == "" || len(a) > 128 {
		return false
	}
	if a[0] >= '0' && a[0] <= '9' {
		for i := 0; i < len(a); i++ {
			if (a[i] < '0' || a[i] > '9') && a[i] != '.' {
				return false
			}
		}
		return !strings.Contains(a, "..") && a[len(a)-1] != '.'
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
