package oob

import (
	"fmt"
	"math"
	"strconv"
)

// MTU is an ibv_mtu enum value, which is what perftest exchanges.
type MTU int32

// ibv_mtu values.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Valid reports whether m is one of the five ibv_mtu values
// (perftest's valid_mtu_size).
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

// Bytes returns the MTU in bytes (256 for MTU256 ... 4096 for MTU4096), or
// 0 if m is not valid.
func (m MTU) Bytes() int {
	if !m.Valid() {
		return 0
	}
	return 128 << m
}

func (m MTU) String() string {
	if !m.Valid() {
		return fmt.Sprintf("MTU(%d)", int32(m))
	}
	return strconv.Itoa(m.Bytes())
}

// EncodeMTU returns the MTU message of the given size (2, or 4 for peers
// older than 5.31): sprintf("%d") of the enum, NUL-terminated, truncated to
// size and NUL-padded. (perftest sends uninitialised stack bytes after the
// NUL in the 4-byte form; only the prefix up to the NUL means anything.)
func EncodeMTU(m MTU, size int) []byte {
	b := make([]byte, size)
	copy(b, strconv.Itoa(int(m)))
	return b
}

// ParseMTU returns the value of an MTU message as perftest computes it:
// strtol(msg, NULL, 10) converted to int. The message ends at its first
// NUL or at its end; garbage gives 0, which is not a valid MTU.
func ParseMTU(b []byte) int32 {
	i := 0
	for i < len(b) && isCSpace(b[i]) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var v int64
	overflow := false
	for ; i < len(b) && isDigit(b[i]); i++ {
		d := int64(b[i] - '0')
		if !overflow {
			if v > (math.MaxInt64-d)/10 {
				overflow = true
			} else {
				v = v*10 + d
			}
		}
	}
	switch {
	case overflow && neg:
		v = math.MinInt64 // strtol: LONG_MIN
	case overflow:
		v = math.MaxInt64 // strtol: LONG_MAX
	case neg:
		v = -v
	}
	return int32(v) // C's (int) conversion of a long keeps the low 32 bits
}

// EffectiveMTU returns the MTU perftest uses after the exchange: the
// remote value if it is a valid ibv_mtu and smaller than the local one,
// else the local one.
func EffectiveMTU(local MTU, remote int32) MTU {
	if r := MTU(remote); r.Valid() && local > r {
		return r
	}
	return local
}
