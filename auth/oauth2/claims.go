package oauth2

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// maxScopes is rabbit_auth_backend_oauth2's MAX_SCOPE_COUNT: a token
// carrying more scopes (after aliases and extra sources) is refused.
const maxScopes = 2048

// rptScopesPath is where a Keycloak Requesting Party Token keeps its
// scopes; RabbitMQ always reads it.
const rptScopesPath = "authorization.permissions.scopes"

// defaultUsernameClaims are RabbitMQ's DEFAULT_PREFERRED_USERNAME_CLAIMS,
// tried after the configured ones.
var defaultUsernameClaims = []string{"sub", "client_id"}

// unknownUser is the user name RabbitMQ gives a token none of whose
// preferred claims is a string.
const unknownUser = "unknown"

// splitSpaces is binary:split(B, <<" ">>, [global, trim_all]).
func splitSpaces(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' })
}

// scopeList reads a claim's value as a list of scopes, as RabbitMQ's
// extract_scope_list_from_token_value: a space-separated string, a list
// (of strings; other elements are skipped), or an object whose member
// named after the resource server lists scopes without the prefix (a
// Keycloak resource_access claim).
func (c *compiled) scopeList(v any) []string {
	switch v := v.(type) {
	case string:
		return splitSpaces(v)
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case map[string]any:
		var names []string
		switch m := v[c.resourceServerID].(type) {
		case string:
			names = splitSpaces(m)
		case []any:
			for _, e := range m {
				if s, ok := e.(string); ok {
					names = append(names, s)
				}
			}
		}
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = c.resourceServerID + "." + n
		}
		return out
	}
	return nil
}

// claimPath collects the scopes at a dotted path ("realm_access.roles"),
// descending through objects and through every object of a list, as
// RabbitMQ's extract_token_value does.
func (c *compiled) claimPath(v any, path []string) []string {
	if len(path) == 0 {
		return c.scopeList(v)
	}
	switch v := v.(type) {
	case map[string]any:
		next, ok := v[path[0]]
		if !ok {
			return nil
		}
		if len(path) == 1 {
			return c.scopeList(next)
		}
		return c.claimPath(next, path[1:])
	case []any:
		var out []string
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				out = append(out, c.claimPath(m, path)...)
			}
		}
		return out
	}
	return nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '.' })
}

// scopes is RabbitMQ's normalize_token_scope: the scope claim, the RPT's
// scopes, the additional_scopes_key paths, the scope aliases, then only
// the scopes carrying this resource server's prefix, with it removed,
// sorted and without duplicates.
func (c *compiled) scopes(claims map[string]any) ([]string, error) {
	var all []string
	for _, p := range c.extraPaths {
		all = append(all, c.claimPath(claims, p)...)
	}
	all = append(all, c.claimPath(claims, splitPath(rptScopesPath))...)
	if s, ok := claims["scope"]; ok {
		all = append(all, c.scopeList(s)...)
	}
	if len(c.aliases) > 0 {
		n := len(all)
		for _, s := range all[:n] {
			all = append(all, c.aliases[s]...)
		}
	}
	out := all[:0:0]
	for _, s := range all {
		if rest, ok := strings.CutPrefix(s, c.scopePrefix); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxScopes {
		return nil, fmt.Errorf("token has %d scopes, more than %d", len(out), maxScopes)
	}
	return out, nil
}

// username is RabbitMQ's username_from: the first preferred claim that is
// a string.
func (c *compiled) username(claims map[string]any) string {
	for _, k := range c.usernameClaims {
		if s, ok := claims[k].(string); ok {
			return s
		}
	}
	return unknownUser
}

// tags are the scopes "tag:<tag>" (prefix already removed).
func tags(scopes []string) []string {
	var out []string
	for _, s := range scopes {
		if t, ok := strings.CutPrefix(s, "tag:"); ok && t != "" {
			out = append(out, t)
		}
	}
	return out
}

// numericDate reads a JWT NumericDate claim (seconds since the epoch, a
// JSON number, possibly fractional); ok is false when it is absent, and
// err set when it is not a number.
func numericDate(claims map[string]any, name string) (t time.Time, ok bool, err error) {
	v, present := claims[name]
	if !present {
		return time.Time{}, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, true, fmt.Errorf("claim %s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e15 {
		return time.Time{}, true, fmt.Errorf("claim %s is not a usable time", name)
	}
	return time.Unix(int64(f), 0), true, nil
}

// audiences reads the aud claim: a string or a list of strings.
func audiences(claims map[string]any) []string {
	switch v := claims["aud"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
