package raft

import "context"

// A write's life as a proposal: registered under its id, submitted to
// the proposer, resolved by the apply loop (or failed when the node
// stops), and waited for by its caller.

func (n *Node) newProposal() *proposal {
	return &proposal{id: n.reqBase | n.reqSeq.Add(1)&(1<<32-1), done: make(chan result, 1)}
}

func (n *Node) register(p *proposal) {
	n.waits.Lock()
	n.waits.m[p.id] = p
	n.waits.Unlock()
}

// forget drops p when its caller gives up.
func (n *Node) forget(p *proposal) {
	n.waits.Lock()
	delete(n.waits.m, p.id)
	n.waits.Unlock()
	p.resolved.Store(true)
}

// resolve delivers the result of request id if this node proposed it and
// its caller still waits.
func (n *Node) resolve(id uint64, r result) {
	n.waits.Lock()
	p := n.waits.m[id]
	delete(n.waits.m, id)
	n.waits.Unlock()
	if p != nil && p.resolved.CompareAndSwap(false, true) {
		p.done <- r
	}
}

func (n *Node) failPending(err error) {
	n.waits.Lock()
	ps := n.waits.m
	n.waits.m = map[uint64]*proposal{}
	n.queues.m = map[uint64]*peerQueue{}
	n.waits.Unlock()
	for _, p := range ps {
		if p.resolved.CompareAndSwap(false, true) {
			p.done <- result{err: err}
		}
	}
}

// submit proposes c and waits until it is applied on this node.
func (n *Node) submit(ctx context.Context, c *cmd) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	select {
	case <-n.stopc:
		return result{}, n.stoppedErr()
	default:
	}
	p := n.newProposal()
	p.data = appendCommand(nil, p.id, c)
	n.register(p)
	select {
	case n.propc <- p:
	case <-ctx.Done():
		n.forget(p)
		return result{}, ctx.Err()
	case <-n.stopc:
		n.forget(p)
		return result{}, n.stoppedErr()
	}
	return n.wait(ctx, p)
}

func (n *Node) wait(ctx context.Context, p *proposal) (result, error) {
	select {
	case r := <-p.done:
		return r, r.err
	case <-ctx.Done():
		n.forget(p)
		return result{}, ctx.Err()
	case <-n.stopc:
		n.forget(p)
		return result{}, n.stoppedErr()
	}
}
