// Package cluster runs pair tests across the ranks of a parallel job:
// Schedule plans the rounds of disjoint pairs (all pairs, a ring, one to
// all), Coordinate is rank 0's side (the rendezvous of every rank over TCP,
// then the rounds), Join is every rank's side (rank 0's too), and Report
// turns the gathered results into a matrix with failing links and nodes,
// written as text, JSON, CSV or HTML. The test itself is a function the
// caller gives (internal/clustercli runs one of perftest's tests); the
// ranks come from package launch.
//
// Schedule and NewReport are pure. Coordinate and Join each own their
// connections and close them before they return; every wait is bounded
// (Config's timeouts) and ends when the context does. Coordinate calls
// Config.Round from its own goroutine, one round at a time.
package cluster
