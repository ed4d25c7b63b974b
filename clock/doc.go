// Package clock is the time source of Warren's queue engine: message TTLs,
// queue expiry (x-expires) and enqueue timestamps read it, so tests drive
// them with Fake.Advance instead of sleeping. Heartbeats and network
// timeouts stay on real time.
//
// Real is safe for concurrent use. Fake is too: Now, AfterFunc and Stop may
// be called from any goroutine while another calls Advance. Advance runs
// the functions of due timers on its own goroutine, in deadline order, with
// no lock held, so a timer function may call back into the Fake.
package clock
