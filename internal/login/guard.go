package login

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/meta"
)

// Errors of Guard.Password; check them with errors.Is.
var (
	// ErrRefused: wrong credentials, or no such user. It counted against
	// the source.
	ErrRefused = errors.New("login: refused")
	// ErrUnavailable: the user store did not answer within the timeout
	// (the error wraps the store's). It did not count against the source.
	ErrUnavailable = errors.New("login: the user store did not answer")
	// ErrClosed: the broker closed, or ctx ended, while the login waited
	// out its source's throttle delay.
	ErrClosed = errors.New("login: not answered")
)

// Users is the part of the meta store a Guard reads (meta.Accounts has it).
type Users interface {
	GetUser(ctx context.Context, name string) (meta.User, error)
}

// Guard is the login door every login goes through: the source's
// throttle delay, the user read within Timeout, the password check.
type Guard struct {
	Throttle *Throttle
	Users    Users
	// Timeout bounds each read of Users (the broker's
	// Options.LoginTimeout).
	Timeout time.Duration
	// Quit, once closed, ends throttle waits (the broker is closing).
	Quit <-chan struct{}
}

// Wait reserves the answer of a login from src and waits out its throttle
// delay; it reports false when the login should not be answered because
// ctx ended or Quit closed meanwhile.
func (g *Guard) Wait(ctx context.Context, src string) bool {
	d := g.Throttle.Admit(src)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-g.Quit:
		return false
	}
}

// Lookup reads a login's user within the timeout.
func (g *Guard) Lookup(ctx context.Context, name string) (meta.User, error) {
	if len(name) > 255 {
		// Admin.PutUser refuses such names: nobody to read, and no reason to
		// send a 120 KB key through the store.
		return meta.User{}, fmt.Errorf("login: user name of %d bytes: %w", len(name), meta.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	return g.Users.GetUser(ctx, name)
}

// Unavailable reports whether a user-store error means the store could
// not answer (rather than that the user does not exist).
func Unavailable(err error) bool { return err != nil && !errors.Is(err, meta.ErrNotFound) }

// Password is a password login from peer, HTTP basic auth's: the source's
// throttle delay, the user read within the timeout, the password checked
// against its stored hash. A refusal counts against the source; an
// unavailable store does not (the credentials were not checked).
func (g *Guard) Password(ctx context.Context, peer net.Addr, name, password string) (meta.User, error) {
	src := SourceKey(peer)
	if !g.Wait(ctx, src) {
		return meta.User{}, ErrClosed
	}
	u, err := g.Lookup(ctx, name)
	if Unavailable(err) {
		return meta.User{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err == nil && passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, password) {
		return u, nil
	}
	g.Throttle.Failed(src)
	return meta.User{}, ErrRefused
}
