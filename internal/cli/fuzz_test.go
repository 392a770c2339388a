package cli

import (
	"io"
	"strings"
	"testing"
)

// FuzzParse: any command line of any test is parsed, refused with an
// error, or both, never with a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "-s 8 -n 100", "--loopback -a", "-d emu0 -x 1 -F host", "-l 4 -t 3 -n 12", "--recv_post_list=4 -r 3",
		"-D 5 -f 1 --cpu_util", "-R -c UD", "-c RawEth -a", "--report-both -b -D 2", "-e -X 1", "-C -U -H",
		"--repeat 5 --repeat_ci 2.5", "--interval_json=- -D 2", "--latency_gap=20000000", "-s 9999999999999",
		"--data_validation -t 32", "-q 16384 -s 9000", "--output=latency", "-p 65536", "--tos 300", "-m 1000",
	} {
		for i := range len(testSpecs) {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, test uint8, cmdline string) {
		name := testSpecs[int(test)%len(testSpecs)].name
		_, _ = Parse(name, strings.Fields(cmdline), io.Discard, io.Discard)
	})
}
