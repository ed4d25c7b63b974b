package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// raftNode is the "raft" object of /api/nodes.
type raftNode struct {
	ID      uint64 `json:"id"`
	Role    string `json:"role"`
	Leader  uint64 `json:"leader"`
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit_index"`
	Applied uint64 `json:"applied_index"`
	Peers   []struct {
		ID           uint64 `json:"id"`
		Match        uint64 `json:"match_index"`
		Next         uint64 `json:"next_index"`
		State        string `json:"state"`
		RecentActive bool   `json:"recent_active"`
	} `json:"peers"`
}

// httpGet fetches path from h as guest.
func httpGet(h http.Handler, path string) ([]byte, error) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := srv.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, err
}

// nodeRaft reads node i's raft state from its /api/nodes over HTTP.
func (c *testCluster) nodeRaft(i int) (raftNode, error) {
	body, err := httpGet(c.broker(i).ManagementHandler(), "/api/nodes")
	if err != nil {
		return raftNode{}, err
	}
	var nodes []struct {
		Raft raftNode `json:"raft"`
	}
	if err := json.Unmarshal(body, &nodes); err != nil {
		return raftNode{}, err
	}
	// The answering member comes first, with its raft state; with queue
	// groups every other member follows it (name, running, its groups).
	if len(nodes) == 0 {
		return raftNode{}, fmt.Errorf("/api/nodes lists no node")
	}
	return nodes[0].Raft, nil
}

// metricsOf scrapes node i's /metrics.
func (c *testCluster) metricsOf(i int) string {
	c.t.Helper()
	body, err := httpGet(c.broker(i).MetricsHandler(broker.MetricsOptions{}), "/metrics")
	require.NoError(c.t, err)
	return string(body)
}

// TestRaftStatusOverHTTP: /api/nodes and /metrics of each member say which
// member leads, the term, commit and applied indexes, and on the leader
// every member's replication progress; after the leader is cut off, the
// others report the new leader.
func TestRaftStatusOverHTTP(t *testing.T) {
	c := newTestCluster(t)
	lead := c.leader()
	_, ch := c.dial(lead)
	_, err := ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	p := newConfirmer(t, ch)
	require.True(t, p.publish("", "jobs", "m", waitFor))

	// Every member has applied the publish once it is confirmed on the
	// leader and the followers heard the next heartbeat's commit index.
	var st [3]raftNode
	require.Eventually(t, func() bool {
		for i := range st {
			var err error
			if st[i], err = c.nodeRaft(i); err != nil {
				return false
			}
		}
		top := st[lead].Commit
		for i := range st {
			if st[i].Applied < top || st[i].Leader != uint64(lead+1) {
				return false
			}
		}
		for _, pr := range st[lead].Peers {
			if pr.Match < top || pr.State != "replicate" {
				return false
			}
		}
		return true
	}, waitFor, 20*time.Millisecond, "members agree: %+v", st)
	for i, s := range st {
		require.Equal(t, uint64(i+1), s.ID)
		require.Equal(t, st[lead].Term, s.Term)
		if i == lead {
			require.Equal(t, "leader", s.Role)
			require.Len(t, s.Peers, 3)
			for j, pr := range s.Peers {
				require.Equal(t, uint64(j+1), pr.ID)
				require.True(t, pr.RecentActive)
				require.Equal(t, pr.Match+1, pr.Next)
			}
		} else {
			require.Equal(t, "follower", s.Role)
			require.Empty(t, s.Peers, "only the leader tracks progress")
		}
	}

	metrics := c.metricsOf(lead)
	for _, want := range []string{
		`warren_raft_state{state="leader"} 1`,
		`warren_raft_state{state="follower"} 0`,
		fmt.Sprintf("warren_raft_leader_id %d\n", lead+1),
		fmt.Sprintf("warren_raft_term %d\n", st[lead].Term),
		fmt.Sprintf(`warren_raft_peer_state{peer="%d",state="replicate"} 1`, (lead+1)%3+1),
		fmt.Sprintf(`warren_raft_peer_recent_active{peer="%d"} 1`, (lead+1)%3+1),
		"warren_raft_commit_index ", "warren_raft_applied_index ", "warren_raft_peer_match_index{", "warren_raft_peer_next_index{",
	} {
		require.Contains(t, metrics, want)
	}
	other := (lead + 1) % 3
	metrics = c.metricsOf(other)
	require.Contains(t, metrics, `warren_raft_state{state="follower"} 1`)
	require.NotContains(t, metrics, "warren_raft_peer_state{")

	// The leader is cut off: the others elect one of them and say so.
	var rest []uint64
	for i := range c.nodes {
		if i != lead {
			rest = append(rest, uint64(i+1))
		}
	}
	c.net.Partition([]uint64{uint64(lead + 1)}, rest)
	next := c.leader(lead)
	require.Eventually(t, func() bool {
		s, err := c.nodeRaft(other)
		return err == nil && s.Leader == uint64(next+1) && s.Term > st[lead].Term
	}, waitFor, 20*time.Millisecond)
	s, err := c.nodeRaft(next)
	require.NoError(t, err)
	require.Equal(t, "leader", s.Role)
	require.Contains(t, c.metricsOf(next), `warren_raft_state{state="leader"} 1`)
	c.net.Heal()
}
