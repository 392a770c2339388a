package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWireTwoProcesses: two pvperf processes whose emulated devices have
// addresses of their own (127.0.1.x, loopback) and a network transport
// forced, so that they talk RoCE v2 over UDP or TCP instead of copying
// memory. Each test exits 0 on both sides, checks the data it received
// where it can (--check_data), and the header names the transport.
func TestWireTwoProcesses(t *testing.T) {
	cases := []struct {
		test string
		args []string
	}{
		{"write_bw", []string{"-s", "65536", "-n", "300", "--check_data"}},
		{"read_bw", []string{"-s", "10000", "-n", "300", "--check_data"}},
		{"send_bw", []string{"-s", "3000", "-n", "300", "--check_data"}},
		{"send_bw", []string{"-c", "UD", "-n", "300", "--check_data"}},
		{"atomic_bw", []string{"-n", "300"}},
		{"write_lat", []string{"-n", "300"}},
		{"send_lat", []string{"-n", "300"}},
		{"read_lat", []string{"-n", "300"}},
		{"atomic_lat", []string{"-n", "300"}},
	}
	n := 0
	for _, transport := range []string{"roce", "tcp"} {
		for _, c := range cases {
			n++
			srvAddr, cliAddr := fmt.Sprintf("127.0.1.%d", 2*n), fmt.Sprintf("127.0.1.%d", 2*n+1)
			name := transport + "/" + c.test + "_" + strings.Join(c.args[:2], "")
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				envOf := func(addr string) []string {
					return append(os.Environ(), "PVPERF_EMU=addr="+addr+",transport="+transport)
				}
				// A port freePort found may be gone when the server
				// binds it (another test process took it), and then
				// another is tried.
				var srv *proc
				var args []string
				for attempt := 0; ; attempt++ {
					port := strconv.Itoa(freePort(t))
					args = append([]string{"-d", "emu0", "-p", port}, c.args...)
					srv = startEnv(t, ctx, envOf(srvAddr), c.test, args...)
					if attempt < 3 && serverLostPort(ctx, srv, port) {
						continue
					}
					waitListening(t, ctx, srv, port)
					break
				}
				cli := startEnv(t, ctx, envOf(cliAddr), c.test, append(args, "127.0.0.1")...)
				for _, p := range []*proc{cli, srv} {
					if code, err := p.wait(); err != nil || code != 0 {
						t.Fatalf("%v: exit %d %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, code, err, p.stdout.String(), p.stderr.String())
					}
				}
				kind := map[string]string{"roce": "RoCE v2", "tcp": "TCP"}[transport]
				want := " Data path       : " + kind + ", " + cliAddr + " -> " + srvAddr + " (emulated device)\n"
				if c.args[1] == "UD" {
					want = " Data path       : " + kind + " from " + cliAddr + " (emulated device)\n"
				}
				if !strings.Contains(cli.stdout.String(), want) {
					t.Errorf("client output lacks %q:\n%s", want, cli.stdout.String())
				}
				if !strings.Contains(cli.stdout.String(), " Network port    : ") {
					t.Errorf("client output lacks the network port's counters:\n%s", cli.stdout.String())
				}
			})
		}
	}
}

// serverLostPort waits until server listens on port, and reports true if
// it exited instead because the port was taken.
func serverLostPort(ctx context.Context, server *proc, port string) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-server.banner:
			return false
		case <-server.copied:
			_, _ = server.wait()
			return strings.Contains(server.stdout.String()+server.stderr.String(), "Couldn't listen to port")
		case <-ctx.Done():
			return false
		case <-tick.C:
			if listening(port) {
				return false
			}
		}
	}
}
