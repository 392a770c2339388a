package bench

import "github.com/pvperf/pvperf/verbs"

// Bounds of perftest's dynamic CQE poll batch.
const (
	dynPollMin       = 16
	dynPollMax       = 1024
	dynPollStabilize = 10   // equal polls in a row that end the adaptation
	dynPollThreshold = 0.85 // a poll under this share of the batch shrinks it
	maxQPNum         = 16384
)

// poller polls a completion queue with perftest's batch rule: a fixed
// batch (--cqe_poll, 16 by default, 64 for many QPs with large messages),
// or, with dynamic polling, a batch that starts at 1024 and adapts to what
// the polls return during the first completions of the run, then stays.
type poller struct {
	wc      []verbs.WC
	size    int  // the batch: how many completions one poll asks for
	dynamic bool // still adapting
	stable  int  // polls in a row that returned lastNE
	lastNE  int
	// until is the completion count up to which the batch adapts.
	until uint64
	// enabled is the run's dynamic polling switch: a batch that has
	// stabilized turns it off, and the next loop of the run (the next
	// size of -a) polls with the fixed batch, as perftest's.
	enabled *bool
}

// newPoller returns the poller of a bandwidth loop of cfg.
func newPoller(cfg *Config) *poller {
	p := &poller{size: cfg.pollBatch(), dynamic: cfg.DynamicPolling, enabled: &cfg.DynamicPolling}
	if p.dynamic {
		p.size = dynPollMax
		if cfg.Duration > 0 {
			p.until = uint64(max(cfg.NumQPs*3, 1000))
		} else {
			p.until = min(cfg.Iters/4, maxQPNum)
		}
	}
	p.wc = make([]verbs.WC, p.size)
	return p
}

// poll polls cq once; count is the number of completions counted so far,
// which ends the adaptation. The completions are p.wc[:n].
func (p *poller) poll(cq verbs.CQ, count uint64) (int, error) {
	n, err := cq.Poll(p.wc[:p.size])
	if err != nil || !p.dynamic || count >= p.until {
		return n, err
	}
	p.adapt(n)
	return n, nil
}

// adapt is perftest's poll_cq_adaptive after a poll that returned n.
func (p *poller) adapt(n int) {
	switch {
	case n == p.size && p.size < dynPollMax:
		p.size = min((p.size+n)/2, dynPollMax)
		p.stable = 0
	case float64(n) < float64(p.size)*dynPollThreshold:
		if p.size > dynPollMin {
			p.size = max((p.size+n)/2, dynPollMin)
			p.stable = 0
		}
	case n == p.lastNE:
		if p.stable++; p.stable >= dynPollStabilize {
			p.dynamic = false
			*p.enabled = false
		}
	default:
		p.stable = 0
	}
	p.lastNE = n
}
