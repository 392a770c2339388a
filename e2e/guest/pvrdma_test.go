package guest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checks of the pvrdma lab (scripts/pvrdma-lab.sh): the kernel's
// vmw_pvrdma driver on QEMU 7.2's pvrdma device model, in a guest nested in
// a guest. The device model cannot run everything: a check it cannot run is
// an expected failure (a subtest named xfail_...), which passes when the
// run ends with an error (pvperf must not hang; perftest, which has no
// timeout of its own, may) and fails when the run passes (the explanation
// is then wrong).

var (
	lab    = flag.String("guest.lab", "", `the lab the device is in: "qemu-pvrdma" (QEMU's pvrdma device model) enables the TestLab checks`)
	netdev = flag.String("guest.netdev", "eth0", "the device's network interface (the lab adds an IPv6 address per UD test)")
	ipCmd  = flag.String("guest.ip", "iproute2-ip", "iproute2's ip command")
	l1     = flag.String("guest.l1", "10.0.2.2", "the first guest as the second sees it, where perftest servers wait on rxe0 for TestLabNative")
)

// Options of the lab's pairs. Every work request the device model posts to
// its backend is signalled (hw/rdma/rdma_backend.c,
// rdma_backend_post_send), so a completion stands for one message, not for
// cq_mod of them: -Q 1 makes every work request signalled on both sides.
const (
	labBW  = "-n 50 -Q 1"
	labLat = "-n 100"
)

// checkData is added to the options of a pvperf pair in the lab: each side
// checks that the bytes the device model delivered are the ones sent.
const checkData = " --check_data"

// noRDMA is why the tests of RDMA WRITE, READ and atomics fail: QEMU 7.2
// posts every guest send work request to the backend as IBV_WR_SEND, and
// gives the guest no remote key the backend knows; the operation arrives
// as a SEND at a QP with no receive posted, whose RNR retries (rnr_retry 7)
// never end.
const noRDMA = "QEMU's pvrdma posts every guest work request as IBV_WR_SEND (hw/rdma/rdma_backend.c rdma_backend_post_send); the peer has no receive posted, its RNR retries never end (rnr_retry 7), no completion arrives"

// staleAH is why a UD test that sends to a GID an earlier test sent to
// fails: QEMU keeps one backend address handle per destination GID for all
// its guests' processes (hw/rdma/rdma_backend.c create_ah, ah_hash), made
// in a protection domain that is gone.
const staleAH = "QEMU's pvrdma reuses the backend address handle the first process made for this destination GID (hw/rdma/rdma_backend.c create_ah, ah_hash), whose PD is gone"

func needLab(t *testing.T) {
	t.Helper()
	needDevice(t)
	if *lab != "qemu-pvrdma" {
		t.Skip("a check of the pvrdma lab (-guest.lab=qemu-pvrdma, scripts/pvrdma-lab.sh)")
	}
}

func labOpts(test string) string {
	if strings.HasSuffix(test, "_lat") {
		return labLat
	}
	return labBW
}

// labArgs are the options of a lab pair on GID gid.
func labArgs(gid int, extra string) []string {
	return append([]string{"-d", *device, "-x", fmt.Sprint(gid), "-F"}, strings.Fields(extra)...)
}

// expectFail runs a pair the device model cannot run (see the package's
// lab comment).
func (p pair) expectFail(t *testing.T, why string) {
	t.Helper()
	r := p.run()
	r.log(t, p, false)
	if r.err == nil {
		t.Fatalf("passed, though expected to fail (%s)", why)
	}
	// A pair that did not run, or whose server never started, failed for
	// a reason of the lab's, not of the device model's.
	if strings.HasPrefix(r.err.Error(), "not run:") {
		t.Skipf("%v", r.err)
	}
	for _, setup := range []string{"server did not start", "not listening", "before listening"} {
		if strings.Contains(r.err.Error(), setup) {
			t.Fatalf("the pair did not start: %v", r.err)
		}
	}
	// pvperf ends, and says why: no progress, a miscount it refused, a
	// verb the device does not have, or the device's error completion.
	// perftest may wait for ever instead.
	said := regexp.MustCompile(`(?m)^.*(no progress|unsignalled|not supported|Completion with error).*$`).FindString(r.client + r.server)
	if strings.HasPrefix(p.client, *pvperfDir) {
		for _, hang := range []string{"timed out", "still running"} {
			if strings.Contains(r.err.Error(), hang) {
				t.Fatalf("pvperf did not end with an error: %v", r.err)
			}
		}
		if said == "" {
			t.Fatalf("pvperf failed without saying why the device model cannot run it (%s): %v", why, r.err)
		}
	}
	if said == "" {
		said = r.err.Error()
	}
	t.Logf("XFAIL: %s (expected: %s)", strings.TrimSpace(said), why)
}

// gids counts the GIDs freshGID made.
var gids int

// freshGID adds a link-local IPv6 address no test used before to
// -guest.netdev and returns the index of the GID the driver makes of it:
// every UD test gets a destination of its own (see staleAH). Link-local,
// because libibverbs (perftest) finds the MAC address of a link-local GID in
// the GID itself, and fails to create an address handle for a global
// address of its own host; the device model ignores the MAC.
func freshGID(t *testing.T) int {
	t.Helper()
	gids++
	addr := fmt.Sprintf("fe80::7700:%x/64", gids)
	want := fmt.Sprintf("fe80:0000:0000:0000:0000:0000:7700:%04x", gids)
	if out, err := exec.Command(*ipCmd, "-6", "addr", "add", addr, "dev", *netdev, "nodad").CombinedOutput(); err != nil {
		t.Fatalf("ip -6 addr add %s: %v: %s", addr, err, out)
	}
	files, _ := filepath.Glob(filepath.Join("/sys/class/infiniband", *device, "ports/1/gids/*"))
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) == want {
				idx, err := strconv.Atoi(filepath.Base(f))
				if err != nil {
					t.Fatalf("GID file %s: %v", f, err)
				}
				return idx
			}
		}
	}
	t.Fatalf("%s did not appear in the GID table of %s in 10s", addr, *device)
	return 0
}

// labTests runs send_bw and send_lat, send_bw -c UD, send_lat -c UD (an
// expected failure: both sides send to the one GID they share, and the
// second sender gets the first one's address handle) and the six tests of
// RDMA operations (expected failures), with server and client from dirs.
func labTests(t *testing.T, cmd func(string) string, check string) {
	for _, test := range []string{"send_bw", "send_lat"} {
		t.Run(test, func(t *testing.T) {
			pair{server: cmd(test), client: cmd(test), args: labArgs(*gidIndex, labOpts(test)+check), serverRow: true}.check(t)
		})
	}
	t.Run("send_bw_UD", func(t *testing.T) {
		pair{server: cmd("send_bw"), client: cmd("send_bw"), args: labArgs(freshGID(t), "-c UD "+labBW+check), serverRow: true}.check(t)
	})
	t.Run("xfail_send_lat_UD", func(t *testing.T) {
		pair{server: cmd("send_lat"), client: cmd("send_lat"), args: labArgs(freshGID(t), "-c UD "+labLat)}.expectFail(t, staleAH)
	})
	for _, test := range []string{"write_bw", "write_lat", "read_bw", "read_lat", "atomic_bw", "atomic_lat"} {
		t.Run("xfail_"+test, func(t *testing.T) {
			pair{server: cmd(test), client: cmd(test), args: labArgs(*gidIndex, labOpts(test))}.expectFail(t, noRDMA)
		})
	}
}

// TestLabSmoke is what CI runs in the lab: pvperf's send_bw, send_lat and
// send_bw -c UD, each side checking the bytes it received, one interop
// pair and one expected failure.
func TestLabSmoke(t *testing.T) {
	needLab(t)
	t.Run("send_bw", func(t *testing.T) {
		pair{server: pv("send_bw"), client: pv("send_bw"), args: labArgs(*gidIndex, labBW+checkData), serverRow: true}.check(t)
	})
	t.Run("send_lat", func(t *testing.T) {
		pair{server: pv("send_lat"), client: pv("send_lat"), args: labArgs(*gidIndex, labLat+checkData), serverRow: true}.check(t)
	})
	t.Run("send_bw_UD", func(t *testing.T) {
		pair{server: pv("send_bw"), client: pv("send_bw"), args: labArgs(freshGID(t), "-c UD "+labBW+checkData), serverRow: true}.check(t)
	})
	t.Run("interop_send_bw_pvperf_server", func(t *testing.T) {
		pair{server: pv("send_bw"), client: pt("send_bw"), args: labArgs(*gidIndex, labBW), serverRow: true}.check(t)
	})
	t.Run("xfail_write_bw", func(t *testing.T) {
		pair{server: pv("write_bw"), client: pv("write_bw"), args: labArgs(*gidIndex, labBW)}.expectFail(t, noRDMA)
	})
}

// TestLabPvperf runs the eight tests, pvperf against pvperf.
func TestLabPvperf(t *testing.T) {
	needLab(t)
	labTests(t, pv, checkData)
}

// TestLabReference runs the same tests, perftest against perftest: what
// the device model does for perftest itself (whose clients hang where
// pvperf's end with an error: 45 s each).
func TestLabReference(t *testing.T) {
	needLab(t)
	defer func(d time.Duration) { *runTimeout = d }(*runTimeout)
	*runTimeout = 45 * time.Second
	labTests(t, pt, "")
}

// TestLabCQMod runs send_bw with perftest's default cq_mod (100): the
// device model completes every work request, perftest counts each
// completion as cq_mod messages and hangs or fails; pvperf sees more
// completions than it signalled and refuses to go on.
func TestLabCQMod(t *testing.T) {
	needLab(t)
	why := "every work request is signalled by the device model (hw/rdma/rdma_backend.c rdma_backend_post_send sets IBV_SEND_SIGNALED), and a completion counts as cq_mod messages"
	for _, c := range []struct{ name, cmd string }{{"xfail_perftest", pt("send_bw")}, {"xfail_pvperf", pv("send_bw")}} {
		t.Run(c.name, func(t *testing.T) {
			pair{server: c.cmd, client: c.cmd, args: labArgs(*gidIndex, "-n 200 -s 4096")}.expectFail(t, why)
		})
	}
}

// TestLabStaleAH shows what made UD look broken on this device: on one
// GID, the first UD test passes; the next process to send to that GID
// fails, perftest as pvperf.
func TestLabStaleAH(t *testing.T) {
	needLab(t)
	gid := freshGID(t)
	a := labArgs(gid, "-c UD "+labBW)
	t.Run("perftest_first", func(t *testing.T) {
		pair{server: pt("send_bw"), client: pt("send_bw"), args: a, serverRow: true}.check(t)
	})
	t.Run("xfail_perftest_again", func(t *testing.T) {
		pair{server: pt("send_bw"), client: pt("send_bw"), args: a}.expectFail(t, staleAH)
	})
	t.Run("xfail_pvperf_then", func(t *testing.T) {
		pair{server: pv("send_bw"), client: pv("send_bw"), args: a}.expectFail(t, staleAH)
	})
}

// TestLabInterop runs pvperf against perftest both ways, for the tests
// perftest passes on this device (send_lat -c UD expected to fail).
func TestLabInterop(t *testing.T) {
	needLab(t)
	for _, test := range []string{"send_bw", "send_lat"} {
		for _, dir := range []struct{ name, server, client string }{
			{"pvperf_server", pv(test), pt(test)}, {"perftest_server", pt(test), pv(test)},
		} {
			t.Run(test+"/"+dir.name, func(t *testing.T) {
				pair{server: dir.server, client: dir.client, args: labArgs(*gidIndex, labOpts(test)), serverRow: true}.check(t)
			})
			ud := test + "_UD/" + dir.name
			if test == "send_lat" {
				t.Run("xfail_"+ud, func(t *testing.T) {
					pair{server: dir.server, client: dir.client, args: labArgs(freshGID(t), "-c UD "+labLat)}.expectFail(t, staleAH)
				})
				continue
			}
			t.Run(ud, func(t *testing.T) {
				pair{server: dir.server, client: dir.client, args: labArgs(freshGID(t), "-c UD "+labBW), serverRow: true}.check(t)
			})
		}
	}
}

// TestLabNative runs pvperf in the nested guest on vmw_pvrdma0 against
// perftest in the first guest on rxe0: servers the first guest's /init
// starts on ports 18600 (send_bw) and 18601 (send_lat), retried while they
// are not up yet.
func TestLabNative(t *testing.T) {
	needLab(t)
	for _, c := range []struct{ test, port string }{{"send_bw", "18600"}, {"send_lat", "18601"}} {
		t.Run(c.test, func(t *testing.T) {
			args := append(labArgs(*gidIndex, labOpts(c.test)), "-p", c.port, *l1)
			tmo, ok := budget(*runTimeout)
			if !ok {
				t.Fatalf("not run: the time budget (%s) is spent", *budgetFlag)
			}
			var out []byte
			var err error
			for i := 0; i < 10; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), tmo)
				out, err = exec.CommandContext(ctx, pv(c.test), args...).CombinedOutput()
				cancel()
				if !strings.Contains(string(out), "Couldn't connect") && !strings.Contains(string(out), "Unable to init") {
					break
				}
				time.Sleep(3 * time.Second)
			}
			t.Logf("%s %s\n%s", pv(c.test), strings.Join(args, " "), out)
			switch {
			case err != nil:
				t.Fatalf("%v: %s", err, lastLine(string(out)))
			case !hasRow(string(out)):
				t.Fatal("no result row")
			}
		})
	}
}

// TestDevinfo compares pvperf's devinfo -v with ibv_devinfo -v: every
// attribute ibv_devinfo prints (but the extended ones of
// ibv_query_device_ex, which devinfo does not print), with the same value.
func TestDevinfo(t *testing.T) {
	needDevice(t)
	ibv, err := exec.LookPath("ibv_devinfo")
	if err != nil {
		t.Skip("no ibv_devinfo in this guest")
	}
	run := func(name string) map[string]string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, "-v", "-d", *device).CombinedOutput()
		t.Logf("%s -v -d %s\n%s", name, *device, out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return devinfoAttrs(string(out))
	}
	want, got := run(ibv), run(pv("devinfo"))
	extended := map[string]bool{}
	for _, k := range strings.Fields("general_odp_caps rc_odp_caps uc_odp_caps ud_odp_caps xrc_odp_caps device_cap_flags_ex tso_caps max_tso rss_caps max_rwq_indirection_tables max_rwq_indirection_table_size rx_hash_function rx_hash_fields_mask max_wq_type_rq packet_pacing_caps qp_rate_limit_min qp_rate_limit_max port_cap_flags2") {
		extended[k] = true
	}
	compared, skipped := 0, 0
	for k, v := range want {
		if extended[k[strings.LastIndex(k, "/")+1:]] {
			skipped++
			continue
		}
		compared++
		if g, ok := got[k]; !ok {
			t.Errorf("missing in devinfo: %s (%s)", k, v)
		} else if g != v {
			t.Errorf("differs: %s: ibv_devinfo %q, devinfo %q", k, v, g)
		}
	}
	t.Logf("%d attributes of ibv_devinfo -v compared; %d extended ones not printed by devinfo", compared, skipped)
}

// devinfoAttrs reads the "key: value" lines of ibv_devinfo -v's output,
// keys of a port prefixed "port N/", blanks removed from keys ("GID[  0]"
// is "GID[0]") and runs of blanks in values made one.
func devinfoAttrs(out string) map[string]string {
	m := map[string]string{}
	prefix := ""
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		key := strings.Join(strings.Fields(k), "")
		val := strings.Join(strings.Fields(v), " ")
		switch key {
		case "hca_id":
			prefix = ""
			continue
		case "port":
			prefix = "port " + val + "/"
			continue
		case "":
			continue
		}
		m[prefix+key] = val
	}
	return m
}
