package cmbench

import (
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
)

// Step is one step of a connection's setup or teardown.
type Step int

// Steps, in the order of a connection's life. Connect is the client's
// request until the answer; Accept the server's answer until the
// connection is established; RTRQP is, on the client, INIT again and RTR
// (the access rights come with the answer); FullConnect is, on the client,
// the id's creation until the RTU, on the server, the request's arrival
// until the connection is established.
const (
	CreateID Step = iota
	ResolveAddr
	ResolveRoute
	CreateQP
	InitQP
	Connect
	RTRQP
	RTSQP
	Establish
	Accept
	FullConnect
	Disconnect
	Destroy
	numSteps
)

var stepNames = [numSteps]string{
	CreateID:     "create id",
	ResolveAddr:  "resolve addr",
	ResolveRoute: "resolve route",
	CreateQP:     "create qp",
	InitQP:       "init qp",
	Connect:      "connect",
	RTRQP:        "rtr qp",
	RTSQP:        "rts qp",
	Establish:    "establish",
	Accept:       "accept",
	FullConnect:  "full connect",
	Disconnect:   "disconnect",
	Destroy:      "destroy",
}

func (s Step) String() string {
	if s >= 0 && s < numSteps {
		return stepNames[s]
	}
	return "step?"
}

// roleSteps are the steps each side measures, in the order they are
// reported.
var roleSteps = map[Role][]Step{
	Client: {CreateID, ResolveAddr, ResolveRoute, CreateQP, InitQP, Connect, RTRQP, RTSQP, Establish, FullConnect, Disconnect, Destroy},
	Server: {CreateQP, InitQP, RTRQP, RTSQP, Accept, FullConnect, Disconnect, Destroy},
}

// Result is one side's measurements.
type Result struct {
	Role   Role   `json:"role"`
	Device string `json:"device"`
	// Server is the server's address (the listening one, on a server).
	Server string `json:"server"`
	Conns  int    `json:"connections"`
	// Elapsed is the setup of all connections: from the first id's
	// creation (client) or request (server) to the last establishment.
	Elapsed time.Duration `json:"-"`
	// ConnsPerSec is Conns over Elapsed.
	ConnsPerSec float64    `json:"connections_per_sec"`
	Steps       []StepStat `json:"steps"`
}

// StepStat is one step over all connections.
type StepStat struct {
	Step Step `json:"-"`
	// Wall is the wall time of the phase that ran the step for every
	// connection; zero for a step taken inside another's phase (RTR,
	// RTS and the RTU inside the client's connect, the server's steps
	// inside its accepts).
	Wall time.Duration
	// The distribution of the step's time over the connections.
	Mean, Min, P50, P90, P99, Max time.Duration
}

// result summarises the run's times.
func (r *run) result() *Result {
	cfg := r.cfg
	res := &Result{Role: cfg.Role, Device: r.dev, Server: cfg.Addr.String(), Conns: len(r.conns),
		Elapsed: r.last.Sub(r.first)}
	if res.Elapsed > 0 {
		res.ConnsPerSec = float64(res.Conns) / res.Elapsed.Seconds()
	}
	v := make([]float64, len(r.conns))
	for _, s := range roleSteps[cfg.Role] {
		for i, c := range r.conns {
			v[i] = float64(c.d[s])
		}
		res.Steps = append(res.Steps, stepStat(s, r.wall[s], v))
	}
	for i := range res.Steps {
		switch st := &res.Steps[i]; st.Step {
		case FullConnect:
			st.Wall = res.Elapsed
		case Accept:
			st.Wall = r.wall[Connect]
		}
	}
	return res
}

// stepStat summarises the times v (nanoseconds; sorted in place).
func stepStat(s Step, wall time.Duration, v []float64) StepStat {
	slices.Sort(v)
	q := func(p float64) time.Duration { return time.Duration(stat.Quantile(p, stat.Empirical, v, nil)) }
	return StepStat{Step: s, Wall: wall, Mean: time.Duration(stat.Mean(v, nil)),
		Min: time.Duration(v[0]), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: time.Duration(v[len(v)-1])}
}
