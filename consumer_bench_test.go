package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/measure"
)

// BenchmarkConsumers measures, through the direct channel, one
// basic.consume and its basic.cancel on a queue and a channel that
// already hold n consumers, and closing a channel with n consumers (per
// consumer). Neither must grow with n: both were linear per consumer, so
// 40,000 consumers took 15 s to close and 100,000 took 37 s to register.
// cpu-ns is the process's CPU time, which a busy machine disturbs less than
// wall time; the direct channel runs a goroutine per consumer, whose stacks
// every collection scans, so some growth with n is the runtime's.
func BenchmarkConsumers(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 50_000} {
		b.Run(fmt.Sprintf("consume-cancel/consumers=%d", n), func(b *testing.B) {
			br := startBroker(b, broker.Options{})
			ch, err := br.Channel(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer ch.Close()
			if _, err := ch.QueueDeclare("q", false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if _, err := ch.Consume("q", fmt.Sprint("t", i), false, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			cpu := measure.ProcessCPU()
			for i := range b.N {
				tag := fmt.Sprint("b", i)
				if _, err := ch.Consume("q", tag, false, false, false, false, nil); err != nil {
					b.Fatal(err)
				}
				if err := ch.Cancel(tag, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(measure.ProcessCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("close/consumers=%d", n), func(b *testing.B) {
			br := startBroker(b, broker.Options{})
			setup, err := br.Channel(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := setup.QueueDeclare("q", false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			for range b.N {
				b.StopTimer()
				ch, err := br.Channel(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := ch.Consume("q", fmt.Sprint("t", i), false, false, false, false, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := measure.ProcessCPU()
				if err := ch.Close(); err != nil {
					b.Fatal(err)
				}
				cpu += measure.ProcessCPU() - start
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/consumer")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/consumer")
		})
	}
}
