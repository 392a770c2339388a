package bench

import "github.com/pvperf/pvperf/verbs"

// dest is what one QP tells its peer out of band (perftest's
// pingpong_dest): enough to connect to it and to address its memory.
type dest struct {
	LID      uint16
	OutReads int
	QPN      uint32
	PSN      uint32
	RKey     uint32
	VAddr    uint64
	GID      verbs.GID
	SRQN     uint32
}
