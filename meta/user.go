package meta

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/warrenmq/broker/internal/passwd"
)

// User is a broker user as RabbitMQ's definitions file and management API
// carry it: a salted password hash, base64(salt ++ H(salt ++ password))
// with a 4-byte salt, H named by HashingAlgorithm (RabbitMQ's module
// names; empty means SHA-256). Password is the plain-text form some
// hand-written files and PUT /api/users use instead; a store keeps the
// hash, never a password (the broker hashes it before storing). It is
// the one User type: package definitions and the root package alias it.
// The stores keep a user in the record form EncodeRecord writes.
type User struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash,omitempty"`
	Password         string         `json:"password,omitempty"`
	HashingAlgorithm string         `json:"hashing_algorithm,omitempty"`
	Tags             UserTags       `json:"tags"`
	Limits           map[string]any `json:"limits"`
}

// UserTags are a user's tags. They are written as a JSON list (RabbitMQ
// 3.9 and later) and read from a list or from the comma-separated string
// older releases wrote.
type UserTags []string

// MarshalJSON writes the tags as a list, [] when there are none.
func (t UserTags) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]string(t))
}

// UnmarshalJSON reads a list or a comma-separated string.
func (t *UserTags) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*t = list
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("broker: user tags are neither a list nor a string")
	}
	*t = nil
	for _, tag := range strings.Split(s, ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			*t = append(*t, tag)
		}
	}
	return nil
}

// HashedUser returns u as a store keeps it: its plain Password hashed
// (salted SHA-256, as RabbitMQ's default), or its PasswordHash checked
// against its HashingAlgorithm, and no Password or Limits. It is the one
// check of a user's password fields, for the broker's writes and a
// definitions import alike; the error names the field at fault.
func HashedUser(u User) (User, error) {
	var stored []byte
	if u.PasswordHash == "" && u.Password != "" {
		stored = passwd.Hash(u.Password)
	} else {
		var err error
		if stored, err = passwd.Import(u.HashingAlgorithm, u.PasswordHash); err != nil {
			return User{}, err
		}
	}
	alg, hash := passwd.Export(stored)
	return User{Name: u.Name, PasswordHash: hash, HashingAlgorithm: alg, Tags: slices.Clone(u.Tags)}, nil
}
