package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// channel is the part of *amqp091.Channel a scenario uses. Warren's direct
// API (broker.Channel) is meant to have the same method set, which is what
// lets -inprocess=direct drive the same scenarios without frames.
type channel interface {
	ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	ExchangeDelete(name string, ifUnused, noWait bool) error
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error
	QueueDelete(name string, ifUnused, ifEmpty, noWait bool) (int, error)
	Qos(prefetchCount, prefetchSize int, global bool) error
	Confirm(noWait bool) error
	NotifyPublish(confirm chan amqp091.Confirmation) chan amqp091.Confirmation
	NotifyClose(c chan *amqp091.Error) chan *amqp091.Error
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
	Get(queue string, autoAck bool) (msg amqp091.Delivery, ok bool, err error)
	Close() error
}

var (
	_ channel = (*amqp091.Channel)(nil)
	_ channel = (*broker.Channel)(nil)
)

// conn is one client connection; scenarios open channels on it.
type conn interface {
	Channel() (channel, error)
	Close() error
}

type amqpConn struct{ c *amqp091.Connection }

func (a amqpConn) Channel() (channel, error) {
	ch, err := a.c.Channel()
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func (a amqpConn) Close() error { return a.c.Close() }

// target is the broker a run measures: how to connect to it and where its
// CPU time and memory can be read.
type target struct {
	describe string
	dial     func(name string) (conn, error)
	// dialAt dials for slot (a queue's number): with several -url, slot
	// i goes to URL i mod their count, as a load balancer in front of a
	// cluster spreads clients; nil when there is one broker address.
	dialAt func(name string, slot int) (conn, error)
	// cpu returns the broker's CPU time so far; nil when it cannot be known
	// (a remote broker without -broker-pid).
	cpu       func() (time.Duration, error)
	cpuSource string
	// memPID is whose /proc status gives RSS: 0 for this process, -1 for
	// nobody.
	memPID int
	close  func() error
	// restart stops the broker and starts it again on the same data,
	// returning when it began starting; nil when the broker is not ours
	// to restart (-url) or keeps nothing (-memory).
	restart func() (time.Time, error)
	// dataDir is the in-process broker's data directory ("" without one).
	dataDir string
	// rawURL is the amqp:// URL the raw client dials ("" without a TCP
	// listener: Broker.Dial and the direct API).
	rawURL string
}

const defaultURL = "amqp://guest:guest@127.0.0.1:5672/"

// splitURLs parses -url: one amqp:// or amqps:// URL, or several
// separated by commas (the members of a cluster).
func splitURLs(list string) ([]*url.URL, error) {
	var urls []*url.URL
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
			return nil, fmt.Errorf("perftest: -url %q is not an amqp:// or amqps:// URL (several are separated by commas)", raw)
		}
		urls = append(urls, u)
	}
	return urls, nil
}

// openTarget connects the run to -url or starts an in-process Warren.
func openTarget(cfg *config) (*target, error) {
	switch cfg.inprocess {
	case "":
		urls, err := splitURLs(cfg.url)
		if err != nil {
			return nil, err
		}
		describe := make([]string, len(urls))
		for i, u := range urls {
			describe[i] = u.Redacted()
		}
		raw := strings.Split(cfg.url, ",")
		dialAt := func(name string, slot int) (conn, error) {
			c, err := amqp091.DialConfig(raw[slot%len(raw)], amqp091.Config{
				Properties: amqp091.Table{"connection_name": name},
			})
			if err != nil {
				return nil, err
			}
			return amqpConn{c}, nil
		}
		t := &target{
			describe: strings.Join(describe, ", "),
			rawURL:   raw[0],
			memPID:   -1,
			close:    func() error { return nil },
			dial:     func(name string) (conn, error) { return dialAt(name, 0) },
			dialAt:   dialAt,
		}
		if cfg.brokerPID > 0 {
			pid := cfg.brokerPID
			pids := append([]int{pid}, cfg.morePIDs...)
			for _, p := range pids {
				if _, err := procCPU(p); err != nil {
					return nil, err
				}
			}
			// Several pids (a cluster's members): their CPU adds up.
			t.cpu = func() (time.Duration, error) {
				var sum time.Duration
				for _, p := range pids {
					d, err := procCPU(p)
					if err != nil {
						return 0, err
					}
					sum += d
				}
				return sum, nil
			}
			list := strings.Trim(strings.ReplaceAll(fmt.Sprint(pids), " ", ","), "[]")
			t.cpuSource = fmt.Sprintf("/proc/{%s}/stat utime+stime", list)
			if len(pids) == 1 {
				t.cpuSource = fmt.Sprintf("/proc/%d/stat utime+stime", pid)
			}
			t.memPID = pid
			t.describe += fmt.Sprintf(" (pid %s)", list)
		}
		return t, nil
	case "dial", "tcp", "direct":
		return openInProcess(cfg)
	default:
		return nil, fmt.Errorf("perftest: -inprocess=%q: want dial, tcp or direct", cfg.inprocess)
	}
}

// openInProcess starts a Warren in this process and reaches it through
// Broker.Dial (an in-memory pipe): the whole wire protocol, no socket; or, for
// -inprocess=tcp, through a loopback listener, so a -cpuprofile shows the
// broker's real socket path rather than the pipe; or, for
// -inprocess=direct, through broker.Channel: method calls, no frames, and no
// amqp091-go connection machinery on the client side. Durable queues
// live in Pebble under a fresh temporary directory unless -memory, so
// persistent-confirm measures synced confirms as it does against RabbitMQ.
func openInProcess(cfg *config) (*target, error) {
	opts := broker.Options{}
	var tmp string
	if !cfg.memory {
		dir := cfg.dataDir
		if dir == "" {
			var err error
			tmp, err = os.MkdirTemp("", "perftest-warren-")
			if err != nil {
				return nil, fmt.Errorf("perftest: data dir: %w", err)
			}
			dir = tmp
		}
		opts.DataDir = dir
	}
	b, err := broker.New(opts)
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, err
	}
	// cur is the broker serving now: restart replaces it.
	var mu sync.Mutex
	cur := b
	current := func() *broker.Broker {
		mu.Lock()
		defer mu.Unlock()
		return cur
	}
	storage := "memory"
	if opts.DataDir != "" {
		storage = "Pebble in " + opts.DataDir
	}
	door := "Broker.Dial (in-memory pipe)"
	listen := ""
	if cfg.inprocess == "tcp" {
		addr, err := b.Listen("127.0.0.1:0")
		if err != nil {
			b.Close()
			if tmp != "" {
				os.RemoveAll(tmp)
			}
			return nil, err
		}
		door, listen = "TCP "+addr.String(), addr.String()
	}
	rawURL := ""
	if listen != "" {
		rawURL = "amqp://guest:guest@" + listen + "/"
	}
	dial := func(name string) (conn, error) {
		b := current()
		var dialer func(network, addr string) (net.Conn, error)
		if listen == "" {
			dialer = b.Dial
		}
		c, err := amqp091.DialConfig(b.URL(), amqp091.Config{
			Dial:       dialer,
			Properties: amqp091.Table{"connection_name": name},
		})
		if err != nil {
			return nil, err
		}
		return amqpConn{c}, nil
	}
	if cfg.inprocess == "direct" {
		door = "the direct API (broker.Channel)"
		dial = func(string) (conn, error) { return &directConn{b: current()}, nil }
	}
	t := &target{
		describe:  "in-process Warren over " + door + ", durable queues in " + storage,
		dial:      dial,
		cpu:       func() (time.Duration, error) { return selfCPU(), nil },
		cpuSource: "whole process: broker and client together (in-process runs cannot split them)",
		memPID:    0,
		dataDir:   opts.DataDir,
		rawURL:    rawURL,
		close: func() error {
			err := current().Close()
			if errors.Is(err, broker.ErrClosed) {
				err = nil
			}
			if tmp != "" {
				err = errors.Join(err, os.RemoveAll(tmp))
			}
			return err
		},
	}
	if opts.DataDir != "" {
		t.restart = func() (time.Time, error) {
			mu.Lock()
			defer mu.Unlock()
			if err := cur.Close(); err != nil && !errors.Is(err, broker.ErrClosed) {
				return time.Time{}, err
			}
			at := time.Now()
			nb, err := broker.New(opts)
			if err != nil {
				return time.Time{}, err
			}
			if listen != "" {
				if _, err := nb.Listen(listen); err != nil {
					nb.Close()
					return time.Time{}, err
				}
			}
			cur = nb
			return at, nil
		}
	}
	return t, nil
}

// directConn stands in for a connection on the direct API, where each
// broker.Channel is its own connection: it remembers the channels it opened
// so closing it closes them, as closing a connection would.
type directConn struct {
	b     *broker.Broker
	mu    sync.Mutex
	chans []*broker.Channel
}

func (d *directConn) Channel() (channel, error) {
	ch, err := d.b.Channel(context.Background())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.chans = append(d.chans, ch)
	d.mu.Unlock()
	return ch, nil
}

func (d *directConn) Close() error {
	d.mu.Lock()
	chans := d.chans
	d.chans = nil
	d.mu.Unlock()
	var errs []error
	for _, ch := range chans {
		if err := ch.Close(); err != nil && !errors.Is(err, amqp091.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
