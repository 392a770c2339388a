package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pvperf/pvperf/emu"
)

func runDevInfo(t *testing.T, cmdline string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	s := DevInfo(strings.Fields(cmdline), &out, &errOut)
	return s, out.String(), errOut.String()
}

func TestDevInfo(t *testing.T) {
	t.Setenv(emu.EnvVar, "profile=unrestricted,netdev=lo;profile=pvrdma-hw13,netdev=lo")
	status, out, errOut := runDevInfo(t, "")
	if status != 0 || errOut != "" {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	for _, want := range []string{
		"hca_id:\temu0\n", "hca_id:\temu1\n",
		"\tkind:\t\t\t\temulated\n",
		"\tdriver:\t\t\t\temu/unrestricted\n", "\tdriver:\t\t\t\temu/pvrdma-hw13\n",
		"\tfw_ver:\t\t\t\t", "\tnode_guid:\t\t\t", "\tvendor_id:\t\t\t0x15ad\n", "\tvendor_part_id:\t\t\t2080\n",
		"\tmax_qp:\t\t\t\t", "\tmax_qp_wr:\t\t\t", "\tmax_sge:\t\t\t", "\tmax_cq:\t\t\t\t", "\tmax_cqe:\t\t\t",
		"\tmax_mr:\t\t\t\t", "\tmax_pd:\t\t\t\t", "\tmax_srq:\t\t\t0\n", "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
		"\tatomic_cap:\t\t\tATOMIC_NONE (0)\n", "\tmax_inline_data:\t\t1024\n",
		"\t\tport:\t1\n", "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n", "\t\t\tmax_mtu:\t\t4096 (5)\n",
		"\t\t\tactive_mtu:\t\t1024 (3)\n", "\t\t\tlink_layer:\t\tEthernet\n",
		"| INDEX | GID ", "| IPv4 ", "| TYPE ", "| NETDEV |",
		"127.0.0.1", "| RoCE v2 |", "| IB/RoCE v1 |", " lo ",
		"0000:0000:0000:0000:0000:ffff:7f00:0001",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "max_mr_size") {
		t.Error("max_mr_size printed without -v")
	}

	status, out, _ = runDevInfo(t, "-v -d emu1")
	if status != 0 || strings.Contains(out, "emu0") || !strings.Contains(out, "hca_id:\temu1") {
		t.Fatalf("-d emu1: status %d\n%s", status, out)
	}
	for _, want := range []string{"\tmax_mr_size:\t\t\t0x", "\tmax_qp_rd_atom:\t\t\t16\n", "\tmax_ud_qp:\t\t\t3\n",
		"\t\t\tgid_tbl_len:\t\t16\n", "\t\t\tmax_msg_sz:\t\t0x80000000\n",
		// ibv_devinfo -v's words for the port's numbers, and its GID lines.
		"\ttransport:\t\t\tInfiniBand (0)\n", "\t\t\tmax_vl_num:\t\t1 (1)\n", "\t\t\tactive_width:\t\t1X (1)\n",
		"\t\t\tphys_state:\t\tLINK_UP (5)\n", "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:",
		"\t\t\tGID[  1]:\t\t0000:0000:0000:0000:0000:ffff:7f00:0001, RoCE v1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q", want)
		}
	}

	status, out, _ = runDevInfo(t, "-l")
	if status != 0 || out != "2 HCAs found:\n\temu0\n\temu1\n" {
		t.Errorf("-l: %d %q", status, out)
	}
	status, out, errOut = runDevInfo(t, "-d mlx5_0")
	if status != 1 || out != "" || errOut != "IB device 'mlx5_0' wasn't found\n" {
		t.Errorf("-d mlx5_0: %d %q %q", status, out, errOut)
	}
	status, _, errOut = runDevInfo(t, "-i 2")
	if status != 1 || !strings.Contains(errOut, "no port 2") {
		t.Errorf("-i 2: %d %q", status, errOut)
	}
	for _, p := range []string{"0", "-3"} {
		if status, out, errOut := runDevInfo(t, "-i "+p); status != 1 || out != "" || !strings.Contains(errOut, "-i "+p+": ports count from 1") {
			t.Errorf("-i %s: %d %q %q", p, status, out, errOut)
		}
	}
	status, _, errOut = runDevInfo(t, "--bogus")
	if status != 1 || !strings.Contains(errOut, "Usage: devinfo") {
		t.Errorf("--bogus: %d %q", status, errOut)
	}
	status, _, errOut = runDevInfo(t, "-h")
	if status != 0 || !strings.Contains(errOut, "-d, --ib-dev") || !strings.Contains(errOut, "-v, --verbose") {
		t.Errorf("-h: %d %q", status, errOut)
	}
}

func TestDevInfoNoDevice(t *testing.T) {
	t.Setenv(emu.EnvVar, "off")
	status, out, errOut := runDevInfo(t, "")
	if status != 1 || out != "" || errOut != "No IB devices found\n" {
		t.Errorf("no device: %d %q %q", status, out, errOut)
	}
	t.Setenv(emu.EnvVar, "profile=nope")
	if status, _, errOut := runDevInfo(t, ""); status != 1 || !strings.Contains(errOut, "nope") {
		t.Errorf("bad config: %d %q", status, errOut)
	}
	// A device that fails to open is named once.
	t.Setenv(emu.EnvVar, "netdev=nosuch0")
	if status, _, errOut := runDevInfo(t, ""); status != 1 || !strings.HasPrefix(errOut, "devinfo: emu0: open device: ") {
		t.Errorf("device that does not open: %d %q", status, errOut)
	}
}
