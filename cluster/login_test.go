package cluster_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestLoginWithoutLeader: a member that knows no raft leader cannot read
// its users consistently. A login there is answered within
// Broker.LoginTimeout with 320 CONNECTION_FORCED, which clients take for
// "try again" (a hang until the client's own timeout reads as 403 bad
// credentials, which they take for permanent); once the member has a
// leader again the same login succeeds.
func TestLoginWithoutLeader(t *testing.T) {
	c := newTestCluster(t)
	x := (c.leader() + 1) % 3
	// Restart the member with a short login timeout, and a pause that
	// does not close its broker during the test.
	c.stop(x)
	c.cfgs[x].Broker.LoginTimeout = 200 * time.Millisecond
	c.cfgs[x].PauseAfter = 2 * waitFor
	c.start(x)
	url := c.broker(x).URL()
	conn, err := amqp091.Dial(url)
	require.NoError(t, err)
	require.NoError(t, conn.Close())

	var others []uint64
	for i := range c.nodes {
		if i != x {
			others = append(others, uint64(i+1))
		}
	}
	c.net.Partition([]uint64{uint64(x + 1)}, others)
	require.Eventually(t, func() bool { return c.nodes[x].Raft().Leader() == 0 }, waitFor, 10*time.Millisecond)

	_, err = amqp091.DialConfig(url, amqp091.Config{Dial: amqp091.DefaultDial(waitFor)})
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.ConnectionForced, ae.Code, "%v", ae)
	require.Contains(t, ae.Reason, "cannot authenticate now")

	c.net.Heal()
	deadline := time.Now().Add(waitFor)
	for {
		conn, err := amqp091.Dial(url)
		if err == nil {
			require.NoError(t, conn.Close())
			return // logins succeed once the member has a leader
		}
		// While the member catches up: 320 again, never 403.
		require.ErrorAs(t, err, &ae)
		require.Equal(t, amqp091.ConnectionForced, ae.Code, "%v", ae)
		require.True(t, time.Now().Before(deadline), "no login succeeds after the heal")
		time.Sleep(50 * time.Millisecond)
	}
}
