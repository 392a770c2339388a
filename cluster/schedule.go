package cluster

import "fmt"

// Pattern is a set of pairs to test.
type Pattern string

// Patterns.
const (
	AllPairs Pattern = "all-pairs" // every two ranks, once
	Ring     Pattern = "ring"      // each rank with the next (rank n-1 with rank 0)
	OneToAll Pattern = "one-to-all"
)

// ParsePattern parses a pattern's name.
func ParsePattern(s string) (Pattern, error) {
	switch p := Pattern(s); p {
	case AllPairs, Ring, OneToAll:
		return p, nil
	}
	return "", fmt.Errorf("cluster: unknown pattern %q (want %s, %s or %s)", s, AllPairs, Ring, OneToAll)
}

// Pair is one test: the server's rank and the client's.
type Pair struct{ Server, Client int }

// Schedule returns the rounds of pattern p over n ranks: the pairs of a
// round are disjoint (no rank in two of them), so that they all run at
// once. All pairs take n-1 rounds for an even n and n for an odd one (the
// circle method: rank n-1, or a bye, stays put while the others turn), each
// rank serving in about half of its pairs; a ring takes 2 rounds (3 for an
// odd n); one-to-all, n-1 rounds of one pair, rank 0 serving.
func Schedule(p Pattern, n int) ([][]Pair, error) {
	if n < 2 {
		return nil, fmt.Errorf("cluster: %d rank(s): a pair needs 2", n)
	}
	switch p {
	case AllPairs:
		return allPairs(n), nil
	case Ring:
		return ring(n), nil
	case OneToAll:
		rounds := make([][]Pair, 0, n-1)
		for c := 1; c < n; c++ {
			rounds = append(rounds, []Pair{{Server: 0, Client: c}})
		}
		return rounds, nil
	}
	return nil, fmt.Errorf("cluster: unknown pattern %q", p)
}

// Rounds is the number of rounds of pattern p over n ranks (len of
// Schedule's result), without building them; 0 for fewer than 2 ranks or
// an unknown pattern.
func Rounds(p Pattern, n int) int {
	if n < 2 {
		return 0
	}
	switch p {
	case AllPairs:
		return n - 1 + n%2
	case Ring:
		if n == 2 {
			return 1
		}
		return 2 + n%2
	case OneToAll:
		return n - 1
	}
	return 0
}

// allPairs is the circle method over m = n rounded up to even; the pairs
// with the phantom rank m-1 of an odd n are byes.
func allPairs(n int) [][]Pair {
	m := n + n%2
	rounds := make([][]Pair, 0, m-1)
	for r := range m - 1 {
		round := make([]Pair, 0, m/2)
		// Position 0 holds rank m-1; position i holds rank (r+i-1) mod (m-1).
		at := func(i int) int {
			if i == 0 {
				return m - 1
			}
			return (r + i - 1) % (m - 1)
		}
		for i := range m / 2 {
			a, b := at(i), at(m-1-i)
			if a >= n || b >= n {
				continue // a bye
			}
			// The lower rank serves when the sum is odd, the higher one
			// when it is even: each rank serves in about half of its
			// pairs.
			if (a < b) != ((a+b)%2 == 1) {
				a, b = b, a
			}
			round = append(round, Pair{Server: a, Client: b})
		}
		rounds = append(rounds, round)
	}
	return rounds
}

// ring pairs rank i with rank i+1: the even edges, the odd ones, and for
// an odd n the edge from n-1 back to 0 alone.
func ring(n int) [][]Pair {
	var even, odd, last []Pair
	for i := range n {
		p := Pair{Server: i, Client: (i + 1) % n}
		switch {
		case n == 2 && i == 1:
			// Two ranks make one edge, not two.
		case n%2 == 1 && i == n-1:
			last = append(last, p)
		case i%2 == 0:
			even = append(even, p)
		default:
			odd = append(odd, p)
		}
	}
	rounds := [][]Pair{even}
	if len(odd) > 0 {
		rounds = append(rounds, odd)
	}
	if len(last) > 0 {
		rounds = append(rounds, last)
	}
	return rounds
}
