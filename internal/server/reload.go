package server

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
)

// liveSettings are the settings a reload applies to the running server;
// a change to any other is logged as needing a restart.
var liveSettings = map[string]bool{"log-level": true, "v": true}

// watchReload re-reads the settings (the same arguments, the environment
// and the -config file, read again) at each value from hup until ctx is
// done (reload).
func watchReload(ctx context.Context, hup <-chan os.Signal, args []string, started *settings, level *slog.LevelVar, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(args, started, level, logger)
		}
	}
}

// reload reads the settings again and compares them with those the
// server started with: the log level takes effect now; every other
// change is logged as needing a restart (the listeners, users, limits
// and stores are built at start). A file that does not read is logged
// and changes nothing.
func reload(args []string, started *settings, level *slog.LevelVar, logger *slog.Logger) {
	s, err := loadSettings(args, io.Discard)
	if err != nil {
		logger.Error("reload: settings not read, nothing changed", "err", err)
		return
	}
	defer s.auth.close() // only compared: its backends are never used
	l, err := s.level()
	if err != nil {
		logger.Error("reload: settings not read, nothing changed", "err", err)
		return
	}
	// The new level first, so that what follows is logged at it.
	level.Set(l)
	changed := 0
	s.fs.VisitAll(func(f *flag.Flag) {
		was := started.fs.Lookup(f.Name).Value.String()
		now := f.Value.String()
		if was == now || noEnv[f.Name] {
			return
		}
		changed++
		if secretFlags[f.Name] {
			was, now = "********", "********"
		}
		src := "default"
		if o, ok := s.origin[f.Name]; ok {
			src = o.source
		}
		if liveSettings[f.Name] {
			logger.Info("reload: applied", "setting", f.Name, "from", was, "to", now, "source", src)
			return
		}
		logger.Warn("reload: changed, takes effect after a restart", "setting", f.Name, "from", was, "to", now, "source", src)
	})
	logger.Info("reload: done", "changed", changed, "log_level", l.String())
}
