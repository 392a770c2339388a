package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// ErrPayload is the error of a payload file that cannot be used.
var ErrPayload = errors.New("bad payload file")

// readPayload reads --payload_file_path as perftest's create_payload does:
// the file holds 32-bit words written "0xaabbccdd" separated by commas
// (a newline may end any word but the first), and the payload is their
// bytes, each word little-endian, at most size bytes of them.
func readPayload(name string, size int) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("Failed to open '%s': %w", name, err)
	}
	return parsePayload(b, size)
}

// parsePayload is readPayload's parser.
func parsePayload(b []byte, size int) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("Payload size should be greater than 0: %w", ErrPayload)
	}
	if size < 1 {
		size = 1
	}
	// The first word ends at a comma only; the next ones at a comma or a
	// newline (perftest's two strtok calls).
	var words [][]byte
	first, rest, _ := bytes.Cut(b, []byte(","))
	for len(first) == 0 && len(rest) > 0 { // strtok skips leading delimiters
		first, rest, _ = bytes.Cut(rest, []byte(","))
	}
	words = append(words, first)
	words = append(words, bytes.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == '\n' })...)

	out := make([]byte, 0, min(size, 4*len(words)))
	for i, w := range words {
		if len(out) == size {
			break
		}
		if len(w) != 10 {
			return nil, fmt.Errorf("Failed to parse DWORD number: %d: %w", i, ErrPayload)
		}
		// Bytes in memory order: the last two hex digits first.
		for k := 8; k >= 2 && len(out) < size; k -= 2 {
			hi, ok1 := unhex(w[k])
			lo, ok2 := unhex(w[k+1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("Invalid hex char in DWORD number: %d: %w", i, ErrPayload)
			}
			out = append(out, hi<<4|lo)
		}
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// fill repeats pattern over b.
func fill(b, pattern []byte) {
	if len(pattern) == 0 {
		return
	}
	n := copy(b, pattern)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}
