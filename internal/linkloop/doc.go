// Package linkloop is what the shovel and federation supervisors share:
// the goroutine that owns a supervisor's links (Loop: started once, woken
// by Poke, stopped by Stop, which waits for it), and running one link
// through a Placer so that of the brokers sharing a store exactly one
// runs it (Placed).
//
// It promises that Stop returns only after the goroutine Start started
// has returned, that Poke never blocks (a wake-up already pending
// absorbs the next), and that Placed tells its caller whether the link
// runs here before and after each time it does. Restart asks a Placer
// that is a Restarter to restart a link wherever it runs.
package linkloop
