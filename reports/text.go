package reports

import (
	"io"
	"strings"

	"github.com/pvperf/pvperf/perftest"
)

// Every Write function formats its whole output first and writes it with
// one Write call, returning the writer's error. The functions apply
// perftest's own conditions (server or client, --output, the test type), so
// a caller calls them in the order perftest's mains print and gets
// perftest's bytes: for example WriteWaitingBanner prints nothing on the
// client.

func writeString(w io.Writer, s string) error {
	if s == "" {
		return nil
	}
	_, err := io.WriteString(w, s)
	return err
}

// WriteWaitingBanner writes the server's banner (a blank line and the
// "* Waiting for client to connect... *" box). It writes nothing on the
// client or with --output.
func WriteWaitingBanner(w io.Writer, ti *TestInfo) error {
	if !ti.Server || !ti.full() {
		return nil
	}
	return writeString(w, waitingBanner)
}

// Header returns the header block (perftest's ctx_print_test_info), from
// the opening RESULT_LINE to the closing one, or "" with --output.
func Header(ti *TestInfo) string {
	if !ti.full() {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { b.WriteString(cSprintf(format, args...)) }
	v606 := ti.Version == Perftest606

	b.WriteString(ResultLine)
	b.WriteString(headerTitleIndent + ti.Title() + "\n")
	if ti.Events {
		p(" Test with events. Using %s_comp%d\n", ti.Device, ti.CompVector)
	}
	if ti.Multicast {
		b.WriteString(" MultiCast runs on UD!\n")
	}
	p(" Dual-port       : %s\t\tDevice         : %s\n", onOff(ti.DualPort), ti.Device)
	p(" Number of qps   : %d\t\tTransport type : %s\n", ti.NumQPs, ti.Transport.String())
	p(" Connection type : %s\t\tUsing SRQ      : %s\n", ti.Connection.String(), onOff(ti.SRQ))
	ro := orDefault(ti.RelaxedOrdering, On)
	if v606 {
		p(relaxFmt606, ro)
	} else {
		lf := orDefault(ti.LockFree, Off)
		if ro == Unsupported && lf == Unsupported {
			p(relaxLockUnsupported, ro, lf)
		} else {
			p(relaxLockFmt, ro, lf)
		}
	}
	if ti.RelaxedOrderingWarning {
		b.WriteString(roWarning)
	}
	if v606 {
		p(wrAPIFmt606, onOff(ti.WRAPI))
	} else {
		p(wrAPIFmt, onOff(ti.WRAPI), onOff(ti.EnhancedReorder))
	}
	if !ti.Server || ti.Duplex {
		p(" TX depth        : %d\n", ti.TxDepth)
	}
	if ti.PostList > 1 {
		p(" Post List       : %d\n", ti.PostList)
	}
	if ti.RecvPostList > 1 {
		p(" Recv Post List  : %d\n", ti.RecvPostList)
	}
	if ti.recvDepthShown() {
		p(" RX depth        : %d\n", ti.RxDepth)
	}
	if ti.DCSStreams != 0 {
		p(" DCS num streams : %d\n", ti.DCSStreams)
	}
	if ti.DCSActiveStreams != 0 {
		p(" DCS active num streams : %d\n", ti.DCSActiveStreams)
	}
	if ti.Test == perftest.Bandwidth {
		p(" CQ Moderation   : %d\n", ti.CQMod)
		if !v606 {
			if ti.DynamicCQEPoll {
				b.WriteString(" CQE Poll Batch  : Dynamic\n")
			} else {
				p(" CQE Poll Batch  : %hu\n", ti.CQEPollBatch)
			}
		}
	}
	p(" Mtu             : %lu[B]\n", ti.MTU)
	p(" Link type       : %s\n", ti.Link.String())
	if ti.MACForwarding {
		p(" Buffer size     : %d[B]\n", ti.BufferSize)
	}
	if ti.GIDIndex != NotSet {
		p(" GID index       : %d\n", ti.GIDIndex)
	}
	if ti.DualPort && ti.GIDIndex2 != NotSet {
		p(" GID index2      : %d\n", ti.GIDIndex2)
	}
	if ti.Verb != perftest.Read && ti.Verb != perftest.Atomic {
		p(" Max inline data : %d[B]\n", ti.InlineSize)
	} else {
		p(" Outstand reads  : %d\n", ti.OutReads)
	}
	p(" rdma_cm QPs\t : %s\n", onOff(ti.RdmaCMQPs))
	if ti.ROCmMemory != "" {
		p(" Use ROCm memory : %s\n", ti.ROCmMemory)
	}
	if ti.MUSAMemory != "" && !v606 {
		p(" Use MUSA memory : %s\n", ti.MUSAMemory)
	}
	p(" Data ex. method : %s", exchangeMethod(ti))
	if ti.RdmaCMQPs {
		if ti.TOS != NotSet {
			p(" \tTOS    : %d", ti.TOS)
		}
		if ti.Server {
			b.WriteString("\n" + ResultLine + rdmaCMServerWaiting)
		}
	}
	b.WriteString("\n")
	if !v606 && ti.NUMANode >= 0 {
		p(" NUMA node       : %d\n", ti.NUMANode)
	}
	b.WriteString(ResultLine)
	return b.String()
}

// WriteHeader writes Header(ti).
func WriteHeader(w io.Writer, ti *TestInfo) error {
	return writeString(w, Header(ti))
}

func onOff(b bool) string {
	if b {
		return On
	}
	return Off
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func exchangeMethod(ti *TestInfo) string {
	if ti.RdmaCMExchange {
		return "rdma_cm"
	}
	return "Ethernet"
}

// Side says whose QP an address line describes.
type Side int

const (
	Local Side = iota
	Remote
)

func (s Side) String() string {
	if s == Remote {
		return "remote"
	}
	return "local"
}

// AddressLine returns one QP's address line and, when a GID is in use, its
// GID line (perftest's ctx_print_pingpong_data), or "" with --output.
//
// The line is " <side> address: LID %#04x QPN %#06x PSN %#06x", then
// " OUT %#04x" for READ, " RKey %#08x VAddr %#016llx" for READ and WRITE
// (not SEND, WRITE_IMM or ATOMIC), " SRQn %#08x" for XRC and DC. C's '#'
// flag prints no 0x for zero, so LID 0 prints as "0000". With rdma_cm
// (-z/-R) perftest prints from a copy of its parameters whose verb is SEND
// and connection RC, so none of the extra fields appear. The GID line
// (16 bytes in decimal, %02d) follows when GIDIndex is set, or for
// multicast ("MGID") on the sides that have the group.
func AddressLine(ti *TestInfo, side Side, d perftest.Dest) string {
	if !ti.full() {
		return ""
	}
	verb, conn := ti.Verb, ti.Connection
	if ti.RdmaCMExchange {
		verb, conn = perftest.Send, perftest.RC
	}
	lid := d.LID
	if side == Remote && ti.DLID != 0 {
		lid = ti.DLID
	}
	var b strings.Builder
	b.WriteString(cSprintf(basicAddrFmt, side.String(), lid, d.QPN, d.PSN))
	switch verb {
	case perftest.Read:
		b.WriteString(cSprintf(readFmt, d.OutReads))
		b.WriteString(cSprintf(rdmaFmt, d.RKey, d.VAddr))
	case perftest.Write:
		b.WriteString(cSprintf(rdmaFmt, d.RKey, d.VAddr))
	}
	if conn == perftest.XRC || conn == perftest.DC {
		b.WriteString(cSprintf(srqnFmt, d.SRQN))
	}
	b.WriteString("\n")

	localMGID := side == Local && ti.Server
	remoteMGID := side == Remote && !ti.Server
	mgid := ti.Multicast && (ti.Duplex || localMGID || remoteMGID)
	if (ti.GIDIndex > NotSet || mgid) && conn != perftest.RawEth {
		label := "GID"
		if mgid {
			label = "MGID"
		}
		args := make([]any, 0, 17)
		args = append(args, label)
		for _, g := range d.GID {
			args = append(args, g)
		}
		b.WriteString(cSprintf(perfGIDFmt, args...))
	}
	return b.String()
}

// WriteAddresses writes the address lines of all local QPs, then of all
// remote QPs, as perftest's mains do.
func WriteAddresses(w io.Writer, ti *TestInfo, local, remote []perftest.Dest) error {
	var b strings.Builder
	for _, d := range local {
		b.WriteString(AddressLine(ti, Local, d))
	}
	for _, d := range remote {
		b.WriteString(AddressLine(ti, Remote, d))
	}
	if ti.DataPath != "" && ti.full() {
		b.WriteString(" Data path       : " + ti.DataPath + "\n")
	}
	return writeString(w, b.String())
}

// resultLine is the line that opens and closes the result table.
func (ti *TestInfo) resultLine() string {
	if ti.ReportPerPort {
		return ResultLinePerPort
	}
	return ResultLine
}

// bwColumns is the BW table's column header without the line before it.
func (ti *TestInfo) bwColumns(perPort bool) string {
	var h string
	switch {
	case ti.Gbits && perPort:
		h = resultFmtGPerPort
	case ti.Gbits:
		h = resultFmtG
	case perPort && ti.Version == Perftest606:
		h = resultFmtPerPort606
	case perPort:
		h = resultFmtPerPort
	case ti.Version == Perftest606:
		h = resultFmt606
	default:
		h = resultFmt
	}
	if ti.CPUUtil {
		return h + resultExtCPUUtil
	}
	return h + resultExt
}

// BWHeader returns the line and column header that open the BW table
// ("#bytes #iterations BW peak[MiB/sec] ..."), or "" with --output.
func BWHeader(ti *TestInfo) string {
	if !ti.full() {
		return ""
	}
	return ti.resultLine() + ti.bwColumns(ti.ReportPerPort)
}

// WriteBWHeader writes BWHeader(ti).
func WriteBWHeader(w io.Writer, ti *TestInfo) error {
	return writeString(w, BWHeader(ti))
}

// WriteResultLine writes the RESULT_LINE that closes a result table (the
// per-port line with --report-per-port), or nothing with --output.
func WriteResultLine(w io.Writer, ti *TestInfo) error {
	if !ti.full() {
		return nil
	}
	return writeString(w, ti.resultLine())
}

// BWRow is a BW row as printed: for a bidirectional run the sum of both
// sides' results.
type BWRow struct {
	BWResult
	// ExtendedAccuracy: the row prints with 6 decimals (--report_gbits and
	// a local BW average below 0.1 Gb/s, perftest's inc_accuracy).
	ExtendedAccuracy bool
}

// NewBWRow returns the row perftest's print_full_bw_report prints for
// local and, with -b, the remote side's result (nil otherwise). perftest
// decides the 6-decimal format from the local average before adding the
// remote one; NewBWRow does the same.
func NewBWRow(ti *TestInfo, local BWResult, remote *BWResult) BWRow {
	row := BWRow{BWResult: local, ExtendedAccuracy: ti.Gbits && local.Average < 0.1}
	if remote != nil {
		row.BWResult = SumBW(local, *remote)
	}
	return row
}

// BWReport returns a BW row as perftest's print_full_bw_report prints it:
// "%lf\n" of the average with --output=bandwidth, of the message rate with
// --output=message_rate, else the table row (the 6-decimal variant with
// --report_gbits below 0.1 Gb/s, the per-port variant with
// --report-per-port) followed by "\n" or the CPU_Util column. remote is
// the peer's result for a bidirectional run's summed row, nil otherwise.
func BWReport(ti *TestInfo, local BWResult, remote *BWResult) string {
	row := NewBWRow(ti, local, remote)
	r := row.BWResult
	var s string
	switch {
	case ti.Output == perftest.OutputBandwidth:
		return cSprintf(valueFmt, r.Average)
	case ti.Output == perftest.OutputMessageRate:
		return cSprintf(valueFmt, r.MsgRate)
	case ti.ReportPerPort:
		s = cSprintf(reportFmtPerPort, r.Size, r.Iters, r.Peak, r.Average, r.MsgRate,
			r.AvgPort1, r.MsgRatePort1, r.AvgPort2, r.MsgRatePort2)
	case row.ExtendedAccuracy:
		s = cSprintf(reportFmtExt, r.Size, r.Iters, r.Peak, r.Average, r.MsgRate)
	case ti.Version == Perftest606:
		s = cSprintf(reportFmt606, r.Size, r.Iters, r.Peak, r.Average, r.MsgRate)
	default:
		s = cSprintf(reportFmt, r.Size, r.Iters, r.Peak, r.Average, r.MsgRate)
	}
	if ti.full() {
		s += ti.reportExt(r.CPUUtil)
	}
	return s
}

func (ti *TestInfo) reportExt(cpu float32) string {
	if ti.CPUUtil {
		return cSprintf(reportExtCPUUtil, cpu)
	}
	return reportExt
}

// WriteBWReport writes BWReport(ti, local, remote).
func WriteBWReport(w io.Writer, ti *TestInfo, local BWResult, remote *BWResult) error {
	return writeString(w, BWReport(ti, local, remote))
}

// remoteAsPrinted is the peer's row as perftest prints it after its own:
// with this side's CPU_Util, which perftest's print_full_bw_report takes
// from its own parameters for every row.
func remoteAsPrinted(local, remote BWResult) BWResult {
	remote.CPUUtil = local.CPUUtil
	return remote
}

// WriteBWReportBoth writes the --report-both block a bidirectional run
// prints after its summed row: RESULT_LINE, "\n Local results: \n",
// RESULT_LINE, the column header, the local row, RESULT_LINE,
// "\n Remote results: \n", RESULT_LINE, the column header, the remote row.
// (ib_atomic_bw prints the two titles without their trailing space. As in
// perftest the block is printed whatever --output says, and its column
// header never has the per-port columns.)
func WriteBWReportBoth(w io.Writer, ti *TestInfo, local, remote BWResult) error {
	lt, rt := localResults, remoteResults
	if ti.Verb == perftest.Atomic {
		lt, rt = localResultsAtomic, remoteResultsAtomic
	}
	cols := ti.bwColumns(false)
	var b strings.Builder
	b.WriteString(ResultLine + lt + ResultLine + cols)
	b.WriteString(BWReport(ti, local, nil))
	b.WriteString(ResultLine + rt + ResultLine + cols)
	b.WriteString(BWReport(ti, remoteAsPrinted(local, remote), nil))
	return writeString(w, b.String())
}

// latencyColumns is the latency table's column header (iteration or
// duration mode) without the line before it. -C does not change it: the
// header says [usec] even when the values are cycles, as in perftest.
func (ti *TestInfo) latencyColumns() string {
	h := resultFmtLat
	if ti.Duration {
		h = resultFmtLatDur
	}
	if ti.CPUUtil {
		return h + resultExtCPUUtil
	}
	return h + resultExt
}

// LatencyHeader returns the RESULT_LINE and column header that open the
// latency table (the duration-mode header with -D), or "" with --output.
// The iteration-mode header ends with a space, as perftest's does.
func LatencyHeader(ti *TestInfo) string {
	if !ti.full() {
		return ""
	}
	return ResultLine + ti.latencyColumns()
}

// WriteLatencyHeader writes LatencyHeader(ti).
func WriteLatencyHeader(w io.Writer, ti *TestInfo) error {
	return writeString(w, LatencyHeader(ti))
}

// LatencyReport returns what perftest's print_report_lat prints for r:
// with -U ("ReportUnsorted") the samples in measurement order, with -H
// ("ReportHistogram") the sorted samples without the 2 dropped ones, each
// dump as "#, usec" (or "#, cycles") then "%d, %g" lines; after a dump the
// RESULT_LINE and column header again (full output only); then the row, or
// "%lf\n" of t_avg with --output=latency.
func LatencyReport(ti *TestInfo, r *LatencyResult) string {
	var b strings.Builder
	if ti.ReportUnsorted {
		b.WriteString(samplesDump(r.Unit, r.Unsorted, r.Quotient))
	}
	if ti.ReportHistogram {
		b.WriteString(samplesDump(r.Unit, r.Sorted[:min(r.Measured, len(r.Sorted))], r.Quotient))
	}
	if (ti.ReportUnsorted || ti.ReportHistogram) && ti.full() {
		b.WriteString(ResultLine + ti.latencyColumns())
	}
	if ti.Output == perftest.OutputLatency {
		b.WriteString(cSprintf(valueFmt, r.Avg))
		return b.String()
	}
	b.WriteString(cSprintf(reportFmtLat, r.Size, r.Iters, r.Min, r.Max, r.Typical, r.Avg, r.Stdev, r.P99, r.P999))
	b.WriteString(ti.reportExt(r.CPUUtil))
	return b.String()
}

// WriteLatencyReport writes LatencyReport(ti, r).
func WriteLatencyReport(w io.Writer, ti *TestInfo, r *LatencyResult) error {
	return writeString(w, LatencyReport(ti, r))
}

// samplesDump is the -U/-H list: "#, <unit>" then "<n>, %g" per sample,
// numbered from 1, each sample divided by q.
func samplesDump(unit string, samples []int64, q float64) string {
	var b strings.Builder
	b.WriteString(cSprintf(samplesHeaderFmt, unit))
	for i, s := range samples {
		b.WriteString(cSprintf(sampleFmt, i+1, float64(uint64(s))/q))
	}
	return b.String()
}

// LatencyDurationReport returns a duration-mode latency row (perftest's
// print_report_lat_duration), or "%lf\n" of t_avg with --output=latency.
func LatencyDurationReport(ti *TestInfo, r LatencyDurationResult) string {
	if ti.Output == perftest.OutputLatency {
		return cSprintf(valueFmt, r.Avg)
	}
	return cSprintf(reportFmtLatDur, r.Size, r.Iters, r.Avg, r.TPS) + ti.reportExt(r.CPUUtil)
}

// WriteLatencyDurationReport writes LatencyDurationReport(ti, r).
func WriteLatencyDurationReport(w io.Writer, ti *TestInfo, r LatencyDurationResult) error {
	return writeString(w, LatencyDurationReport(ti, r))
}

// Messages printed before the header. perftest prints them whatever
// --output says; the caller decides when they apply (the parameter checks
// are the CLI's). perftest 6.06 prints neither the peak warning for -D or a
// receiving server nor the dynamic polling lines.

// WritePeakWarning writes " WARNING: BW peak won't be measured in this
// run." (-D, --run_infinitely, more than 20000 iterations, or the
// receiving server of a unidirectional SEND/WRITE_IMM BW test).
func WritePeakWarning(w io.Writer) error { return writeString(w, peakWarning) }

// WriteDynamicPollingDisabled writes "Disabling dynamic polling" (6.29:
// fewer than 3000 iterations, duplex SEND or WRITE_IMM, any latency test).
func WriteDynamicPollingDisabled(w io.Writer) error { return writeString(w, dynamicPollingOff) }

// WritePollBatchIncreased writes "Increasing CQE polling batch to <n>".
func WritePollBatchIncreased(w io.Writer, batch int) error {
	return writeString(w, cSprintf(pollBatchIncreased, batch))
}

// WritePostListCQMod writes a RESULT_LINE and "Post List requested - CQ
// moderation will be the size of the post list" (-l > 1 without -Q).
func WritePostListCQMod(w io.Writer) error {
	return writeString(w, ResultLine+postListCQMod)
}

// WriteLargeMessageCQModWarning writes a RESULT_LINE and the two
// "Warning: Large message requested and CQ moderation enabled" lines
// (size > 8192 with -Q > 1, not UD, not -a, not -e).
func WriteLargeMessageCQModWarning(w io.Writer) error {
	return writeString(w, ResultLine+largeMessageCQMod)
}

// WriteInlineNotRecognized writes what perftest prints when it does not
// know the device's inline limits and the inline size is set (READ and
// ATOMIC tests set it to 0, so they always print this on such a device): a
// RESULT_LINE on stdout and "Device not recognized to implement inline
// feature. Disabling it" on stderr.
func WriteInlineNotRecognized(stdout, stderr io.Writer) error {
	if err := writeString(stdout, ResultLine); err != nil {
		return err
	}
	return writeString(stderr, inlineNotRecognized)
}

// WriteUDSizeClamped writes " Max msg size in UD is MTU <mtu>" and
// " Changing to this MTU" (stderr in perftest: UD with -a and a size above
// the MTU).
func WriteUDSizeClamped(w io.Writer, mtu int) error {
	return writeString(w, cSprintf(udSizeClamped, mtu))
}
