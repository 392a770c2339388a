package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/emu"
)

// The tests call Main only on command lines that end before bench.Run:
// errors, -h, -V and device selection.

func runMain(t *testing.T, test, cmdline string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = Main(test, strings.Fields(cmdline), &out, &errOut)
	return status, out.String(), errOut.String()
}

func TestMainExitStatus(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	cases := []struct {
		test, args     string
		stdout, stderr string // prefixes
	}{
		{"write_bw", "-c UD localhost", "", " UD connection only possible in SEND verb\n"},
		{"write_bw", "-h", "Usage:\n  write_bw ", ""},
		{"read_lat", "--help", "Usage:\n  read_lat ", ""},
		{"write_bw", "-V", "Version: 6.29 (pvperf ", ""},
		{"write_bw", "--foo", "Usage:\n", "write_bw: unrecognized option '--foo'\n Invalid Command or flag.\n"},
		{"send_bw", "--use_cuda=0", "", " --use_cuda is not supported by pvperf"},
		{"atomic_bw", "-s 4", RL + "Message size cannot be changed for Atomic tests \n", ""},
		{"write_bw", "-d nosuchdev localhost", "", "IB device nosuchdev not found\n Unable to find the Infiniband/RoCE device\n"},
		{"ping_bw", "", "", " cli: unknown test \"ping_bw\""},
	}
	for _, c := range cases {
		status, out, errOut := runMain(t, c.test, c.args)
		if status != 1 {
			t.Errorf("%s %s: status %d, want 1", c.test, c.args, status)
		}
		if !strings.HasPrefix(out, c.stdout) || (c.stdout == "" && out != "") {
			t.Errorf("%s %s: stdout %q, want %q...", c.test, c.args, out, c.stdout)
		}
		if !strings.HasPrefix(errOut, c.stderr) || (c.stderr == "" && errOut != "") {
			t.Errorf("%s %s: stderr %q, want %q...", c.test, c.args, errOut, c.stderr)
		}
	}
}

func TestMainNoDevice(t *testing.T) {
	t.Setenv(emu.EnvVar, "off")
	want := " Did not detect devices \n If device exists, check if driver is up\n Unable to find the Infiniband/RoCE device\n"
	for _, args := range []string{"localhost", "-d emu0 localhost"} {
		status, out, errOut := runMain(t, "send_lat", args)
		if status != 1 || out != "Disabling dynamic polling\n" || errOut != want {
			t.Errorf("%s: status %d, stdout %q, stderr %q", args, status, out, errOut)
		}
	}
	t.Setenv(emu.EnvVar, "profile=nope")
	status, _, errOut := runMain(t, "send_lat", "localhost")
	if status != 1 || !strings.Contains(errOut, "nope") || !strings.HasSuffix(errOut, " Unable to find the Infiniband/RoCE device\n") {
		t.Errorf("bad PVPERF_EMU: status %d, stderr %q", status, errOut)
	}
}

// TestFindDevice checks the device choice Main makes before bench.Run:
// the default device is emu0 when there is no kernel device.
func TestFindDevice(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=pvrdma-hw14;profile=unrestricted")
	var errOut bytes.Buffer
	d, ok := findDevice("", &errOut)
	if !ok || d.Name() != "emu0" {
		t.Fatalf("default device %v, %v: %s", d, ok, errOut.String())
	}
	d, ok = findDevice("emu1", &errOut)
	if !ok || d.Name() != "emu1" || errOut.Len() != 0 {
		t.Fatalf("emu1: %v, %v: %s", d, ok, errOut.String())
	}
}

func TestMainContextCanceled(t *testing.T) {
	// A canceled context does not change how errors before the run end.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	if s := MainContext(ctx, "write_lat", []string{"-b"}, &out, &errOut); s != 1 ||
		errOut.String() != " Bidirectional is only available in BW test\n"+PF {
		t.Errorf("status %d, stderr %q", s, errOut.String())
	}
}

// TestMainOptionsReachTheEngine runs the emulator through Main: the
// options the command line computes are the ones the run uses and the
// header reports.
func TestMainOptionsReachTheEngine(t *testing.T) {
	t.Setenv(emu.EnvVar, "")
	for _, c := range []struct {
		args   string
		status int
		want   []string // lines of stdout (or stderr) that must be there
		absent []string
	}{
		{"--loopback -n 5000 -s 64 --disable_dynamic_polling", 0, []string{" CQE Poll Batch  : 16"}, []string{"Dynamic"}},
		{"--loopback -n 5000 -s 64", 0, []string{" CQE Poll Batch  : Dynamic"}, []string{"Disabling dynamic polling"}},
		{"--loopback -n 200 -s 64 --cqe_poll=32", 0, []string{"Disabling dynamic polling", " CQE Poll Batch  : 32"}, nil},
		{"--loopback -n 100 --disable_pcie_relaxed", 0, []string{" PCIe relax order: OFF"}, nil},
		{"--loopback -n 100", 0, []string{" PCIe relax order: ON", " ibv_wr* API     : OFF"}, nil},
		{"--loopback -n 100 -w 0 -y 1e12", 1, []string{"Error: Msg rate  is below msg_rate limit"}, nil},
		{"--loopback -n 100 -y 1e12", 0, nil, []string{"Error:"}},
		{"--loopback --payload_file_path=/nonexistent", 1, []string{" Failed to create MR: Failed to open '/nonexistent': no such file or directory",
			" Couldn't create IB resources"}, nil},
	} {
		status, out, errOut := runMain(t, "write_bw", c.args)
		all := out + errOut
		if status != c.status {
			t.Errorf("%s: status %d, want %d\n%s", c.args, status, c.status, all)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: no %q in\n%s", c.args, w, all)
			}
		}
		for _, a := range c.absent {
			if strings.Contains(all, a) {
				t.Errorf("%s: %q in\n%s", c.args, a, all)
			}
		}
	}
	// One rule for dynamic polling: a bidirectional SEND with immediate
	// data keeps it (perftest disables it for SEND only), and the engine
	// polls as the header says.
	status, out, errOut := runMain(t, "send_bw", "--loopback -b --send_with_imm -n 5000 -s 64")
	if status != 0 || strings.Contains(out, "Disabling dynamic polling") || !strings.Contains(out, " CQE Poll Batch  : Dynamic") {
		t.Errorf("send_bw -b --send_with_imm: status %d\n%s%s", status, out, errOut)
	}
}
