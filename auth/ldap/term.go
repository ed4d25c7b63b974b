package ldap

import (
	"errors"
	"fmt"
	"strings"
)

// term is the subset of Erlang terms RabbitMQ's LDAP queries are written
// in: tuples, lists, strings and atoms.
type term interface{ String() string }

type (
	tuple []term
	list  []term
	str   string
	atom  string
)

func (t tuple) String() string { return "{" + joinTerms(t) + "}" }
func (l list) String() string  { return "[" + joinTerms(l) + "]" }
func (s str) String() string   { return quote(string(s), '"') }

// String is the atom bare when Erlang allows it, else quoted.
func (a atom) String() string {
	s := string(a)
	if s != "" && s[0] >= 'a' && s[0] <= 'z' && s != "not" && s != "and" && s != "or" {
		bare := true
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@') {
				bare = false
				break
			}
		}
		if bare {
			return s
		}
	}
	return quote(s, '\'')
}

// quote writes s between q, with \\ and \q escaped as quoted reads them.
func quote(s string, q byte) string {
	var b strings.Builder
	b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', q:
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func joinTerms(ts []term) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, ", ")
}

// termParser reads one term from s; i is the offset reached.
type termParser struct {
	s     string
	i     int
	depth int
}

// space skips white space and % comments.
func (p *termParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		case '%': // an Erlang comment runs to the end of the line
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

// term reads one tuple, list, string or atom; nesting is bounded.
func (p *termParser) term() (term, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		p.depth++
		if p.depth > maxDepth*2 {
			return nil, errors.New("nested too deeply")
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		p.i++
		var items []term
		p.space()
		if p.i < len(p.s) && p.s[p.i] == end {
			p.i++
		} else {
			for {
				t, err := p.term()
				if err != nil {
					return nil, err
				}
				items = append(items, t)
				p.space()
				if p.i >= len(p.s) {
					return nil, fmt.Errorf("missing %q", end)
				}
				if p.s[p.i] == ',' {
					p.i++
					continue
				}
				if p.s[p.i] != end {
					return nil, fmt.Errorf("unexpected %q at offset %d", p.s[p.i], p.i)
				}
				p.i++
				break
			}
		}
		p.depth--
		if c == '{' {
			return tuple(items), nil
		}
		return list(items), nil
	case c == '"' || c == '\'':
		s, err := p.quoted(c)
		if err != nil {
			return nil, err
		}
		if c == '\'' {
			return atom(s), nil
		}
		return str(s), nil
	case c >= 'a' && c <= 'z':
		j := p.i
		for j < len(p.s) && (p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= '0' && p.s[j] <= '9' || p.s[j] == '_' || p.s[j] == '@') {
			j++
		}
		a := atom(p.s[p.i:j])
		p.i = j
		return a, nil
	default:
		return nil, fmt.Errorf("unexpected %q at offset %d", c, p.i)
	}
}

// quoted reads a string or quoted atom closed by q; \\ and \q (and \n,
// \t) are its escapes, as in Erlang.
func (p *termParser) quoted(q byte) (string, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\':
			if p.i >= len(p.s) {
				return "", errors.New("unterminated escape")
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated %c", q)
}
