package server

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/warrenmq/broker"
)

// liveSettings are the settings a reload applies to the running server:
// the log level always; on a single node the alarm limits
// (broker.SetAlarmLimits) and the consumer timeout
// (broker.SetConsumerTimeout); a change to any other is logged as needing
// a restart.
var liveSettings = map[string]bool{"log-level": true, "v": true}

// alarmSettings are applied through broker.SetAlarmLimits.
var alarmSettings = map[string]bool{"memory-high-watermark": true, "disk-free-limit": true}

// watchReload re-reads the settings (the same arguments, the environment
// and the -config file, read again) at each value from hup until ctx is
// done (reload).
func watchReload(ctx context.Context, hup <-chan os.Signal, args []string, started *settings, level *slog.LevelVar, live *atomic.Pointer[broker.Broker], logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			reload(args, started, level, live.Load(), logger)
		}
	}
}

// reload reads the settings again and compares them with those the
// server started with: the log level takes effect now, and so do the
// consumer timeout and the memory and disk alarm limits on a single node
// b (nil: a cluster member, or not started yet), the limits unless
// turning a check on that was off at start;
// every other change is logged as needing a restart (the listeners,
// users and stores are built at start). A file that does not read is
// logged and changes nothing.
func reload(args []string, started *settings, level *slog.LevelVar, b *broker.Broker, logger *slog.Logger) {
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
	var limitsErr error // why the alarm limits were not applied
	limitsChanged := *s.memWatermark != *started.memWatermark || *s.diskFreeLimit != *started.diskFreeLimit
	switch {
	case !limitsChanged:
	case b == nil:
		limitsErr = errNoLiveLimits
	default:
		limitsErr = b.SetAlarmLimits(*s.memWatermark, *s.diskFreeLimit)
	}
	timeoutApplied := false
	if *s.consumerTimeout != *started.consumerTimeout && b != nil {
		b.SetConsumerTimeout(*s.consumerTimeout)
		timeoutApplied = true
	}
	for _, ig := range s.ignored {
		logger.Warn("reload: config key ignored (-unknown-keys warn)", "key", ig)
	}
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
		if liveSettings[f.Name] || alarmSettings[f.Name] && limitsErr == nil || f.Name == "consumer-timeout" && timeoutApplied {
			logger.Info("reload: applied", "setting", f.Name, "from", was, "to", now, "source", src)
			return
		}
		attrs := []any{"setting", f.Name, "from", was, "to", now, "source", src}
		switch {
		case alarmSettings[f.Name]:
			attrs = append(attrs, "why", limitsErr.Error())
		case f.Name == "consumer-timeout":
			attrs = append(attrs, "why", errNoLiveLimits.Error())
		}
		logger.Warn("reload: changed, takes effect after a restart", attrs...)
	})
	logger.Info("reload: done", "changed", changed, "log_level", l.String())
}

// errNoLiveLimits is why a cluster member (or a server still starting)
// takes new alarm limits and consumer timeouts only at a restart: its
// brokers are the cluster node's, built from the settings it started
// with.
var errNoLiveLimits = errors.New("the limits of a cluster member (or of a server still starting) change at a restart")
