package verbs

// BestGID returns the index of the entry perftest's automatic choice of a
// GID picks from table (its get_best_gid_index): the address family asked
// for first, then an address that is not link-local, then the higher RoCE
// version; -1 when every entry is zero.
func BestGID(table []GIDEntry, preferIPv6 bool) int {
	best, bestScore := -1, -1
	for _, g := range table {
		if s := gidScore(g, preferIPv6); s > bestScore {
			best, bestScore = g.Index, s
		}
	}
	return best
}

func gidScore(g GIDEntry, preferIPv6 bool) int {
	if g.GID.IsZero() {
		return -1
	}
	score := 0
	v4 := g.GID.IsV4Mapped()
	if preferIPv6 != v4 {
		score += 100
	}
	linkLocal := g.GID.IsLinkLocal()
	if v4 {
		linkLocal = g.GID.Addr().IsLinkLocalUnicast() // 169.254/16
	}
	if !linkLocal {
		score += 10
	}
	switch g.Type {
	case GIDTypeRoCEv2:
		score += 2
	case GIDTypeRoCEv1:
		score++
	}
	return score
}
