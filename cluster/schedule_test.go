package cluster

import (
	"testing"
)

// check verifies that no rank is in two pairs of a round and returns the
// set of unordered pairs and the number of rounds.
func check(t *testing.T, p Pattern, n int) (map[[2]int]int, [][]Pair) {
	t.Helper()
	rounds, err := Schedule(p, n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int]int{}
	for r, round := range rounds {
		busy := map[int]bool{}
		for _, pr := range round {
			if pr.Server == pr.Client || pr.Server < 0 || pr.Client < 0 || pr.Server >= n || pr.Client >= n {
				t.Fatalf("%s n=%d round %d: pair %+v", p, n, r, pr)
			}
			if busy[pr.Server] || busy[pr.Client] {
				t.Fatalf("%s n=%d round %d: rank in two pairs: %+v", p, n, r, round)
			}
			busy[pr.Server], busy[pr.Client] = true, true
			k := [2]int{min(pr.Server, pr.Client), max(pr.Server, pr.Client)}
			seen[k]++
		}
	}
	return seen, rounds
}

func TestAllPairs(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8, 9, 16, 33, 1024} {
		seen, rounds := check(t, AllPairs, n)
		want := n - 1
		if n%2 == 1 {
			want = n
		}
		if len(rounds) != want {
			t.Errorf("n=%d: %d rounds, want %d", n, len(rounds), want)
		}
		if len(seen) != n*(n-1)/2 {
			t.Errorf("n=%d: %d distinct pairs, want %d", n, len(seen), n*(n-1)/2)
		}
		for k, c := range seen {
			if c != 1 {
				t.Errorf("n=%d: pair %v %d times", n, k, c)
			}
		}
		// Each rank serves in about half of its pairs.
		serves := make([]int, n)
		for _, round := range rounds {
			for _, p := range round {
				serves[p.Server]++
			}
		}
		for r, s := range serves {
			if d := 2*s - (n - 1); d < -2 || d > 2 {
				t.Errorf("n=%d: rank %d serves in %d of its %d pairs", n, r, s, n-1)
				break
			}
		}
	}
}

func TestRingAndOneToAll(t *testing.T) {
	for _, n := range []int{2, 3, 4, 7, 1024} {
		seen, rounds := check(t, Ring, n)
		edges := n
		if n == 2 {
			edges = 1
		}
		if len(seen) != edges {
			t.Errorf("ring n=%d: %d pairs, want %d", n, len(seen), edges)
		}
		for i := range n {
			if seen[[2]int{min(i, (i+1)%n), max(i, (i+1)%n)}] != 1 {
				t.Errorf("ring n=%d: no pair %d-%d", n, i, (i+1)%n)
			}
		}
		if want := 2 + n%2; n > 2 && len(rounds) != want {
			t.Errorf("ring n=%d: %d rounds, want %d", n, len(rounds), want)
		}
		seen, rounds = check(t, OneToAll, n)
		if len(rounds) != n-1 || len(seen) != n-1 {
			t.Errorf("one-to-all n=%d: %d rounds, %d pairs", n, len(rounds), len(seen))
		}
	}
}

func TestRounds(t *testing.T) {
	for _, p := range []Pattern{AllPairs, Ring, OneToAll} {
		for n := 2; n <= 40; n++ {
			s, err := Schedule(p, n)
			if err != nil || Rounds(p, n) != len(s) {
				t.Errorf("%s n=%d: Rounds %d, Schedule %d rounds (%v)", p, n, Rounds(p, n), len(s), err)
			}
		}
	}
	if Rounds(AllPairs, 1) != 0 || Rounds("star", 4) != 0 {
		t.Error("Rounds of no schedule")
	}
}

func TestScheduleErrors(t *testing.T) {
	if _, err := Schedule(AllPairs, 1); err == nil {
		t.Error("one rank: no error")
	}
	if _, err := ParsePattern("star"); err == nil {
		t.Error("pattern star: no error")
	}
	if p, err := ParsePattern("ring"); err != nil || p != Ring {
		t.Errorf("ring: %v, %v", p, err)
	}
}

func BenchmarkSchedule1024(b *testing.B) {
	for b.Loop() {
		if _, err := Schedule(AllPairs, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
