package raft

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// What raft and Pebble log, through the node's slog.Logger.

// raftLogger passes raft's warnings and errors to a slog.Logger and drops
// its chatty info and debug lines.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) log(level slog.Level, msg string) {
	if r.l != nil {
		r.l.Log(context.Background(), level, msg, "component", "etcd-raft")
	}
}

func (raftLogger) Debug(...any)          {}
func (raftLogger) Debugf(string, ...any) {}
func (raftLogger) Info(...any)           {}
func (raftLogger) Infof(string, ...any)  {}
func (r raftLogger) Warning(v ...any)    { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) {
	r.log(slog.LevelWarn, fmt.Sprintf(f, v...))
}
func (r raftLogger) Error(v ...any)            { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any) { r.log(slog.LevelError, fmt.Sprintf(f, v...)) }

// Fatal and Panic mean raft found its invariants broken: a bug or a
// corrupt log. Continuing would risk diverging from the group.
func (r raftLogger) Fatal(v ...any) { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any) {
	r.Panicf(f, v...)
}
func (r raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	r.log(slog.LevelError, s)
	panic("raft: " + s)
}
func (r raftLogger) Panicf(f string, v ...any) {
	s := fmt.Sprintf(f, v...)
	r.log(slog.LevelError, s)
	panic("raft: " + s)
}

// pebbleOptions are the options of both DBs: Pebble's informational
// logging off, on fs (nil for the OS file system).
func pebbleOptions(fs vfs.FS) *pebble.Options {
	return &pebble.Options{Logger: quietPebble{}, FS: fs}
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
