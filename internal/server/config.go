package server

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/warrenmq/broker/internal/rabbitconf"
)

// applyConfigFile sets, from the rabbitmq.conf file path, every flag the
// command line did not set (the command line wins). Keys are RabbitMQ
// 4.x's names; a key Warren does not map is refused with its line. The
// auth keys go to ac (auth_config.go), which builds Options.Auth.
func applyConfigFile(fs *flag.FlagSet, path string, ac *authConfig) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := rabbitconf.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	set := func(name, value string) error {
		if given[name] {
			return nil
		}
		return fs.Set(name, value)
	}
	mgmtIP, mgmtPort := "", ""
	var tab rabbitconf.Table
	flagKey := func(key, name string, conv func(string) (string, error)) {
		tab.Key(key, func(e rabbitconf.Entry) error {
			v, err := conv(e.Value)
			if err != nil {
				return err
			}
			return set(name, v)
		})
	}
	same := func(s string) (string, error) { return s, nil }
	bytes := func(s string) (string, error) {
		n, err := rabbitconf.Bytes(s)
		return strconv.FormatInt(n, 10), err
	}
	listener := func(s string) (string, error) {
		if _, err := strconv.ParseUint(s, 10, 16); err == nil {
			return ":" + s, nil // a port alone: every interface, as RabbitMQ
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return "", fmt.Errorf("%q is neither a port nor host:port", s)
		}
		return s, nil
	}
	flagKey("listeners.tcp.default", "addr", listener)
	flagKey("listeners.ssl.default", "tls-listen", listener)
	flagKey("ssl_options.certfile", "tls-cert", same)
	flagKey("ssl_options.keyfile", "tls-key", same)
	flagKey("ssl_options.cacertfile", "tls-ca", same)
	flagKey("default_user", "user", same)
	flagKey("default_pass", "password", same)
	flagKey("vm_memory_high_watermark.absolute", "memory-high-watermark", bytes)
	flagKey("disk_free_limit.absolute", "disk-free-limit", bytes)
	flagKey("consumer_timeout", "consumer-timeout", func(s string) (string, error) {
		ms, err := rabbitconf.Int(s, 1<<53)
		return strconv.FormatUint(ms, 10) + "ms", err // milliseconds in rabbitmq.conf
	})
	flagKey("loopback_users.guest", "allow-remote-guest", func(s string) (string, error) {
		b, err := rabbitconf.Bool(s)
		return strconv.FormatBool(!b), err
	})
	tab.Key("management.tcp.port", func(e rabbitconf.Entry) error {
		_, err := rabbitconf.Int(e.Value, 65535)
		mgmtPort = e.Value
		return err
	})
	tab.Key("management.tcp.ip", func(e rabbitconf.Entry) error {
		if net.ParseIP(e.Value) == nil {
			return fmt.Errorf("%q is not an IP address", e.Value)
		}
		mgmtIP = e.Value
		return nil
	})
	ac.register(&tab)
	if err := tab.Apply(entries, nil); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := ac.build(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if mgmtPort != "" {
		return set("http", net.JoinHostPort(mgmtIP, mgmtPort))
	} else if mgmtIP != "" {
		return set("http", net.JoinHostPort(mgmtIP, "15672"))
	}
	return nil
}
