package meta

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/warrenmq/broker/internal/passwd"
)

// EncodeRecord returns v as a store on the shared key layout keeps it
// (meta/local and meta/raft): its JSON, but for a User, which is kept in
// the record form stores wrote before User took RabbitMQ's shape (so
// data directories written then still read, and read the same). A
// Policy is encoded by EncodePolicyRecord, which also needs its kind.
func EncodeRecord(v any) ([]byte, error) {
	if u, ok := v.(User); ok {
		rec, err := userRecordOf(u)
		if err != nil {
			return nil, err
		}
		v = rec
	}
	return json.Marshal(v)
}

// DecodeRecord reads what EncodeRecord or EncodePolicyRecord wrote into
// v, a pointer.
func DecodeRecord(b []byte, v any) error {
	switch v := v.(type) {
	case *User:
		var rec userRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		alg, hash := passwd.Export(rec.PasswordHash)
		*v = User{Name: rec.Name, PasswordHash: hash, HashingAlgorithm: alg, Tags: UserTags(rec.Tags)}
		return nil
	case *Policy:
		var rec policyRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		var val policyValue
		d := json.NewDecoder(bytes.NewReader(rec.Value))
		d.UseNumber()
		if err := d.Decode(&val); err != nil {
			return fmt.Errorf("policy %q: %w", rec.Name, err)
		}
		*v = Policy{VHost: rec.VHost, Name: rec.Name, Pattern: val.Pattern, ApplyTo: val.ApplyTo, Definition: val.Definition, Priority: val.Priority}
		return nil
	}
	return json.Unmarshal(b, v)
}

// EncodePolicyRecord returns p, a policy (operator false) or operator
// policy, as a store on the shared key layout keeps it: the record form
// of the stores before Policy took RabbitMQ's shape, its value RabbitMQ's
// runtime parameter value. Definition numbers read back as json.Number.
func EncodePolicyRecord(p Policy, operator bool) ([]byte, error) {
	value, err := json.Marshal(policyValue{Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority, Definition: p.Definition})
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	return json.Marshal(policyRecord{VHost: p.VHost, Name: p.Name, Operator: operator, Value: value})
}

// userRecord is a User as stored: the hash in passwd's stored form.
type userRecord struct {
	Name         string
	PasswordHash []byte
	Tags         []string
}

func userRecordOf(u User) (userRecord, error) {
	if u.Password != "" && u.PasswordHash == "" {
		return userRecord{}, fmt.Errorf("meta: user %q: a store keeps a password hash, not a password", u.Name)
	}
	stored, ok := passwd.Join(u.HashingAlgorithm, u.PasswordHash)
	if !ok {
		return userRecord{}, fmt.Errorf("meta: user %q: unknown hashing_algorithm %q", u.Name, u.HashingAlgorithm)
	}
	return userRecord{Name: u.Name, PasswordHash: stored, Tags: []string(u.Tags)}, nil
}

// policyRecord is a Policy as stored, of its kind.
type policyRecord struct {
	VHost    string
	Name     string
	Operator bool
	Value    json.RawMessage
}

// policyValue is a stored policy's value: RabbitMQ's runtime parameter
// value, in the order the stores wrote it.
type policyValue struct {
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   int            `json:"priority"`
	Definition map[string]any `json:"definition"`
}
