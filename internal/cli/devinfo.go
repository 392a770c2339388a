package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/pflag"

	"github.com/pvperf/pvperf/devices"
	"github.com/pvperf/pvperf/internal/version"
	"github.com/pvperf/pvperf/verbs"
)

// DevInfo is the devinfo command: it lists the RDMA devices, kernel and
// emulated, in the manner of ibv_devinfo (device and port attributes) and
// show_gids (the GID tables). args are the command line without the
// program name. It returns the exit status: 1 when there is no device, or
// not the one asked for.
func DevInfo(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("devinfo", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	dev := fs.StringP("ib-dev", "d", "", "show only device `dev`")
	port := fs.IntP("ib-port", "i", 0, "show only port `port` (default all)")
	list := fs.BoolP("list", "l", false, "print only the device names")
	verbose := fs.BoolP("verbose", "v", false, "print every device and port attribute")
	help := fs.BoolP("help", "h", false, "show this help")
	ver := fs.BoolP("version", "V", false, "print pvperf's version")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: devinfo [options]\n"+
			"  List the RDMA devices (kernel devices first, then emulated ones) with their\n"+
			"  attributes, ports and GID tables, like ibv_devinfo -v and show_gids.\n\nOptions:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "devinfo: %v\n", err)
		fs.Usage()
		return 1
	}
	if *help {
		fs.Usage()
		return 0
	}
	if *ver {
		fmt.Fprintf(stdout, "devinfo (pvperf) %s\n", version.Version)
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "devinfo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 1
	}
	if fs.Changed("ib-port") && *port < 1 {
		fmt.Fprintf(stderr, "devinfo: -i %d: ports count from 1\n", *port)
		return 1
	}

	all, err := devices.List()
	if err != nil {
		fmt.Fprintf(stderr, "devinfo: %v\n", err)
		return 1
	}
	if len(all) == 0 {
		fmt.Fprint(stderr, "No IB devices found\n")
		return 1
	}
	if *list {
		fmt.Fprintf(stdout, "%d HCA%s found:\n", len(all), plural(len(all)))
		for _, d := range all {
			fmt.Fprintf(stdout, "\t%s\n", d.Name())
		}
		return 0
	}
	chosen := all
	if *dev != "" {
		chosen = nil
		for _, d := range all {
			if d.Name() == *dev {
				chosen = append(chosen, d)
			}
		}
		if len(chosen) == 0 {
			fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", *dev)
			return 1
		}
	}
	status := 0
	for i, d := range chosen {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := printDevice(stdout, d, *port, *verbose); err != nil {
			// The device's own errors name it already.
			var oe *verbs.OpError
			if !errors.As(err, &oe) || oe.Device != d.Name() {
				err = fmt.Errorf("%s: %w", d.Name(), err)
			}
			fmt.Fprintf(stderr, "devinfo: %v\n", err)
			status = 1
		}
	}
	return status
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// attrWriter prints "name:" and a value aligned on a tab stop, as
// ibv_devinfo does.
type attrWriter struct {
	w      io.Writer
	indent int // tabs before the name
	column int // where values start
}

func (a attrWriter) put(name string, format string, args ...any) {
	col := 8*a.indent + len(name) + 1
	tabs := 0
	for col < a.column || tabs == 0 {
		col = (col/8 + 1) * 8
		tabs++
	}
	fmt.Fprintf(a.w, "%s%s:%s%s\n", strings.Repeat("\t", a.indent), name, strings.Repeat("\t", tabs),
		fmt.Sprintf(format, args...))
}

func printDevice(w io.Writer, d verbs.Device, onlyPort int, verbose bool) error {
	ctx, err := d.Open()
	if err != nil {
		return err
	}
	defer ctx.Close()
	attr, err := ctx.QueryDevice()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "hca_id:\t%s\n", d.Name())
	a := attrWriter{w: w, indent: 1, column: 40}
	a.put("kind", "%s", d.Kind())
	a.put("driver", "%s", d.Driver())
	// Every device pvperf drives is of the InfiniBand transport (RoCE
	// included), as ibv_devinfo says.
	a.put("transport", "InfiniBand (0)")
	if t, ok := ctx.(interface{ Transports() string }); ok {
		a.put("data_path", "%s", t.Transports())
	}
	a.put("fw_ver", "%s", attr.FWVersion)
	a.put("node_guid", "%s", formatGUID(attr.NodeGUID))
	a.put("sys_image_guid", "%s", formatGUID(attr.SysImageGUID))
	a.put("vendor_id", "0x%04x", attr.VendorID)
	a.put("vendor_part_id", "%d", attr.VendorPartID)
	a.put("hw_ver", "0x%X", attr.HWVersion)
	if b, ok := d.(interface{ BoardID() string }); ok && b.BoardID() != "" {
		a.put("board_id", "%s", b.BoardID())
	}
	a.put("phys_port_cnt", "%d", attr.PhysPortCnt)
	a.put("max_qp", "%d", attr.MaxQP)
	a.put("max_qp_wr", "%d", attr.MaxQPWR)
	a.put("max_sge", "%d", attr.MaxSGE)
	a.put("max_cq", "%d", attr.MaxCQ)
	a.put("max_cqe", "%d", attr.MaxCQE)
	a.put("max_mr", "%d", attr.MaxMR)
	a.put("max_pd", "%d", attr.MaxPD)
	a.put("max_srq", "%d", attr.MaxSRQ)
	a.put("atomic_cap", "%s (%d)", attr.AtomicCap, attr.AtomicCap)
	a.put("max_inline_data", "%d", attr.MaxInlineData)
	a.put("qp_types", "%s", qpTypes(attr.QPTypes))
	if verbose {
		a.put("max_mr_size", "0x%x", attr.MaxMRSize)
		a.put("page_size_cap", "0x%x", attr.PageSizeCap)
		a.put("device_cap_flags", "0x%08x", uint32(attr.Flags))
		a.put("max_sge_rd", "%d", attr.MaxSGERd)
		a.put("max_qp_rd_atom", "%d", attr.MaxQPRdAtom)
		a.put("max_ee_rd_atom", "%d", attr.MaxEERdAtom)
		a.put("max_res_rd_atom", "%d", attr.MaxResRdAtom)
		a.put("max_qp_init_rd_atom", "%d", attr.MaxQPInitRdAtom)
		a.put("max_ee_init_rd_atom", "%d", attr.MaxEEInitRdAtom)
		a.put("max_ee", "%d", attr.MaxEE)
		a.put("max_rdd", "%d", attr.MaxRDD)
		a.put("max_mw", "%d", attr.MaxMW)
		a.put("max_raw_ipv6_qp", "%d", attr.MaxRawIPv6QP)
		a.put("max_raw_ethy_qp", "%d", attr.MaxRawEthyQP)
		a.put("max_mcast_grp", "%d", attr.MaxMcastGrp)
		a.put("max_mcast_qp_attach", "%d", attr.MaxMcastQPAttach)
		a.put("max_total_mcast_qp_attach", "%d", attr.MaxTotalMcastQPAttach)
		a.put("max_ah", "%d", attr.MaxAH)
		a.put("max_fmr", "%d", attr.MaxFMR)
		a.put("max_map_per_fmr", "%d", attr.MaxMapPerFMR)
		a.put("max_srq_wr", "%d", attr.MaxSRQWR)
		a.put("max_srq_sge", "%d", attr.MaxSRQSGE)
		a.put("max_pkeys", "%d", attr.MaxPKeys)
		a.put("local_ca_ack_delay", "%d", attr.LocalCAAckDelay)
		a.put("max_ud_qp", "%s", limitOrNone(attr.MaxUDQP))
		a.put("num_comp_vectors", "%d", attr.NumCompVectors)
	}
	for port := 1; port <= attr.PhysPortCnt; port++ {
		if onlyPort != 0 && port != onlyPort {
			continue
		}
		if err := printPort(w, ctx, port, verbose); err != nil {
			return fmt.Errorf("port %d: %w", port, err)
		}
	}
	if onlyPort > attr.PhysPortCnt {
		return fmt.Errorf("no port %d (the device has %d)", onlyPort, attr.PhysPortCnt)
	}
	return nil
}

func printPort(w io.Writer, ctx verbs.Context, port int, verbose bool) error {
	pa, err := ctx.QueryPort(port)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\t\tport:\t%d\n", port)
	a := attrWriter{w: w, indent: 3, column: 48}
	a.put("state", "PORT_%s (%d)", pa.State, pa.State)
	a.put("max_mtu", "%s (%d)", mtuName(pa.MaxMTU), pa.MaxMTU)
	a.put("active_mtu", "%s (%d)", mtuName(pa.ActiveMTU), pa.ActiveMTU)
	a.put("sm_lid", "%d", pa.SMLID)
	a.put("port_lid", "%d", pa.LID)
	a.put("port_lmc", "0x%02x", pa.LMC)
	a.put("link_layer", "%s", pa.LinkLayer)
	if verbose {
		a.put("max_msg_sz", "0x%x", pa.MaxMsgSz)
		a.put("port_cap_flags", "0x%08x", pa.PortCapFlags)
		a.put("max_vl_num", "%s (%d)", vlName(pa.MaxVLNum), pa.MaxVLNum)
		a.put("bad_pkey_cntr", "0x%x", pa.BadPKeyCntr)
		a.put("qkey_viol_cntr", "0x%x", pa.QKeyViolCntr)
		a.put("sm_sl", "%d", pa.SMSL)
		a.put("pkey_tbl_len", "%d", pa.PKeyTblLen)
		a.put("gid_tbl_len", "%d", pa.GIDTblLen)
		a.put("subnet_timeout", "%d", pa.SubnetTimeout)
		a.put("init_type_reply", "%d", pa.InitTypeReply)
		a.put("active_width", "%sX (%d)", widthName(pa.ActiveWidth), pa.ActiveWidth)
		a.put("active_speed", "%s (%d)", speedName(pa.ActiveSpeed), pa.ActiveSpeed)
		a.put("phys_state", "%s (%d)", physStateName(pa.PhysState), pa.PhysState)
	}
	gids, err := ctx.GIDTable(port)
	if err != nil {
		return fmt.Errorf("gid table: %w", err)
	}
	if verbose {
		// ibv_devinfo -v's lines, then the table.
		for _, g := range gids {
			typ := ""
			if pa.LinkLayer == verbs.LinkEthernet {
				typ = ", RoCE v1"
				if g.Type == verbs.GIDTypeRoCEv2 {
					typ = ", RoCE v2"
				}
			}
			fmt.Fprintf(w, "\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, formatGIDHex(g.GID), typ)
		}
	}
	fmt.Fprintln(w)
	return writeGIDTable(w, gids)
}

// writeGIDTable prints a port's GID table, with the columns of show_gids.
func writeGIDTable(w io.Writer, gids []verbs.GIDEntry) error {
	if len(gids) == 0 {
		_, err := fmt.Fprint(w, "\t\t\tGID table: no GIDs\n")
		return err
	}
	var b strings.Builder
	table := tablewriter.NewTable(&b,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	table.Header("INDEX", "GID", "IPv4", "TYPE", "NETDEV")
	for _, g := range gids {
		ipv4 := ""
		if g.GID.IsV4Mapped() {
			ipv4 = g.GID.Addr().String()
		}
		if err := table.Append(strconv.Itoa(g.Index), g.GID.String(), ipv4, g.Type.String(), g.Netdev); err != nil {
			return err
		}
	}
	if err := table.Render(); err != nil {
		return err
	}
	for line := range strings.Lines(b.String()) {
		if _, err := fmt.Fprint(w, "\t\t\t"+line); err != nil {
			return err
		}
	}
	return nil
}

// formatGIDHex is a GID as ibv_devinfo prints it: eight groups of four
// hexadecimal digits.
func formatGIDHex(g verbs.GID) string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// vlName, widthName, speedName and physStateName decode port attributes
// with ibv_devinfo's words.
func vlName(n uint8) string {
	switch n {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

func widthName(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedName(s uint8) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func physStateName(s uint8) string {
	switch s {
	case 1:
		return "SLEEP"
	case 2:
		return "POLLING"
	case 3:
		return "DISABLED"
	case 4:
		return "PORT_CONFIGURATION TRAINNING" // sic, as ibv_devinfo
	case 5:
		return "LINK_UP"
	case 6:
		return "LINK_ERROR_RECOVERY"
	case 7:
		return "PHY TEST"
	}
	return "invalid physical state"
}

func formatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

func mtuName(m verbs.MTU) string {
	if m.Bytes() == 0 {
		return "invalid"
	}
	return strconv.Itoa(m.Bytes())
}

func qpTypes(ts []verbs.QPType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.String()
	}
	return strings.Join(names, " ")
}

func limitOrNone(n int) string {
	if n == 0 {
		return "no separate limit"
	}
	return strconv.Itoa(n)
}
