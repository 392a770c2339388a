package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuRow is a row of the CPU table: size, local and remote use, local and
// remote CPU per message.
var cpuRow = regexp.MustCompile(`(?m)^ 65536 +([0-9.]+|-) +([0-9.]+|-) +([0-9.]+|-) +([0-9.]+|-)$`)

// TestCPUBothSides: with --cpu_util on both pvperf sides each prints its
// own CPU use and the peer's; the peer of a WRITE test (the server) is the
// mirror of the client. Without --cpu_util on the server the client's
// remote columns stay empty, and it does not wait long for them.
func TestCPUBothSides(t *testing.T) {
	server, client := runPair(t, "write_bw", "-d", "emu0", "-n", "5000", "--cpu_util")
	s, c := cpuRow.FindStringSubmatch(server.stdout.String()), cpuRow.FindStringSubmatch(client.stdout.String())
	if s == nil || c == nil {
		t.Fatalf("no CPU row:\nserver:\n%s\nclient:\n%s", server.stdout.String(), client.stdout.String())
	}
	if s[1] != c[2] || s[2] != c[1] || s[3] != c[4] || s[4] != c[3] || c[2] == "-" || c[4] == "-" {
		t.Errorf("server %q and client %q are not each other's mirror", s[0], c[0])
	}

	// In a sweep the server's CPU covers every size: it is no size's.
	_, client = runPair(t, "write_bw", "-d", "emu0", "-a", "-n", "200", "--cpu_util")
	if c := cpuRow.FindStringSubmatch(client.stdout.String()); c == nil || c[1] == "-" || c[2] != "-" || c[4] != "-" {
		t.Errorf("sweep: the client's 64 KiB row %q gives the server's CPU\n%s", c, client.stdout.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := strconv.Itoa(freePort(t))
	srv := start(t, ctx, "write_bw", "-d", "emu0", "-n", "5000", "-p", port)
	waitListening(t, ctx, srv, port)
	t0 := time.Now()
	cli := start(t, ctx, "write_bw", "-d", "emu0", "-n", "5000", "--cpu_util", "-p", port, "localhost")
	for _, p := range []*proc{cli, srv} {
		if code, err := p.wait(); err != nil || code != 0 {
			t.Fatalf("%v: exit %d %v\n%s", p.cmd.Args, code, err, p.stderr.String())
		}
	}
	c = cpuRow.FindStringSubmatch(cli.stdout.String())
	if c == nil || c[1] == "-" || c[2] != "-" || c[4] != "-" {
		t.Errorf("client facing a server without --cpu_util: %q\n%s", c, cli.stdout.String())
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
	if strings.Contains(srv.stdout.String(), "CPU use over") {
		t.Error("the server printed CPU figures without --cpu_util")
	}
}

// TestCheckDataTwoProcesses: with --check_data a server that receives
// what a pvperf client sends passes; when the client sends other bytes
// (its --payload_file_path) the server fails, saying where; without
// --check_data it does not look.
func TestCheckDataTwoProcesses(t *testing.T) {
	runPair(t, "write_bw", "-d", "emu0", "-n", "200", "--check_data")

	payload := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(payload, []byte("0x11223344,0x55667788"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		port := strconv.Itoa(freePort(t))
		args := []string{"-d", "emu0", "-n", "200", "-p", port}
		if check {
			args = append(args, "--check_data")
		}
		srv := start(t, ctx, "write_bw", args...)
		waitListening(t, ctx, srv, port)
		cli := start(t, ctx, "write_bw", append(args, "--payload_file_path", payload, "localhost")...)
		cc, _ := cli.wait()
		sc, _ := srv.wait()
		cancel()
		failed := strings.Contains(srv.stderr.String(), " Data check failed: queue pair 0: byte 0 of its receive buffer, in the first message, is 0x44, want 0x0c")
		if check && (sc != 1 || !failed) || !check && (sc != 0 || failed) || cc != 0 {
			t.Errorf("--check_data %v: server exit %d, client %d\n%s", check, sc, cc, srv.stderr.String())
		}
	}
}

// TestCPUPassiveServer: the server of read_lat and atomic_lat prints no
// row (as perftest's) but, with --cpu_util, sends its CPU use over its
// wait, which the client prints in its remote columns: near nothing, the
// point of one-sided verbs.
func TestCPUPassiveServer(t *testing.T) {
	for test, size := range map[string]string{"read_lat": "2", "atomic_lat": "8"} {
		_, client := runPair(t, test, "-d", "emu0", "-n", "3000", "--cpu_util")
		row := regexp.MustCompile(`(?m)^ ` + size + ` +([0-9.]+|-) +([0-9.]+|-) +([0-9.]+|-) +([0-9.]+|-)$`).FindStringSubmatch(client.stdout.String())
		if row == nil || row[1] == "-" || row[2] == "-" || row[4] == "-" {
			t.Errorf("%s: the client's CPU row %q has no remote figures\n%s", test, row, client.stdout.String())
		}
	}
}
