// Package cluster plans the pair tests of a run over many ranks: which
// ranks meet in which round. Schedule is a pure function, safe for
// concurrent use; the ranks themselves come from package launch.
package cluster
