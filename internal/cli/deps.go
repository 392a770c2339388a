package cli

import (
	"fmt"

	"github.com/pvperf/pvperf/bench"
	"github.com/pvperf/pvperf/perftest"
	"github.com/pvperf/pvperf/reports"
)

// forceDependencies is perftest's force_dependecies(): the checks between
// options and the values derived from them, in perftest's order, with
// perftest's messages on perftest's streams. Checks that only concern
// options pvperf rejects while parsing (XRC, DC, SRD, multicast, rdma_cm,
// dual port, raw Ethernet, accelerator memory, the rate limiter, vendor
// features) are left out.
//
// Left to the engine, because they need the device or the peer:
//   - the MTU: -m values other than 256..4096 ("Invalid MTU ... Will run with
//     the port active mtu"), clipping to the active MTU ("Requested mtu is
//     higher than active mtu"), and the minimum of both sides;
//   - UD messages larger than the MTU (shrunk with "Max msg size in UD is
//     MTU", or an error when -s was given explicitly);
//   - the inline size when -I is not given (Config.Inline == -1: 220 for
//     write_lat, 236/188 for send_lat RC,UC/UD, 0 otherwise, capped by the
//     device; "Device not recognized to implement inline feature");
//   - outstanding reads (Config.OutReads == 0: the device's max_qp_rd_atom;
//     above it, "Number of outstanding reads is above max");
//   - the link layer (or --force-link), GID auto-selection when -x is not
//     given on RoCE, port state, P_Key index clipping, completion vector
//     against the device's vectors, and SRQ/atomic/UC support;
//   - with --loopback, the adjustments of the server half: the parse takes
//     the client's view (so a unidirectional SEND/WRITE_IMM server's
//     disabled peak is the engine's to apply to its server side).
func (p *parser) forceDependencies() error {
	c := &p.cfg
	bw := p.test.bw()
	lat := p.test.lat()
	recv := p.verb.HasReceives()

	// perftest sets the method from --run_infinitely after reading the
	// whole command line: it replaces -a's.
	if p.runInf {
		p.method = runInfinitely
	}
	if p.verb == perftest.Write {
		c.RxDepth = 1
	}
	if !p.durationMode && p.method != runInfinitely {
		if uint64(c.TxDepth) > c.Iters {
			c.TxDepth = int(c.Iters)
		}
		if recv && uint64(c.RxDepth) > c.Iters {
			c.RxDepth = int(c.Iters)
		}
		if c.Connection == perftest.UD || c.Connection == perftest.UC {
			if c.UseSRQ && c.Iters <= 100 {
				c.RxDepth = 100
			}
			if c.RxDepth == bench.DefaultRecvRxDepth {
				c.RxDepth = int(min(c.Iters, 16000))
			}
		}
	}

	// CQ moderation is pointless with large messages (and distorts the
	// numbers), except where perftest cannot change it: UD, -a, events.
	if c.Size > 8192 && c.Connection != perftest.UD && p.method != runAll && !c.Events {
		if !p.reqCQMod {
			c.CQMod = 1
		} else if c.CQMod > 1 {
			_ = reports.WriteLargeMessageCQModWarning(p.stdout)
		}
	}
	c.CQMod = min(c.CQMod, c.TxDepth)

	if p.verb == perftest.Read || p.verb == perftest.Atomic {
		c.Inline = 0
	}
	if p.method == runAll {
		c.Size = bench.MaxSize
	}
	if p.verb == perftest.Atomic && c.Size != bench.DefaultAtomicSize {
		return p.depErrOut("Message size cannot be changed for Atomic tests \n")
	}
	if c.UseSRQ && p.verb != perftest.Send && p.verb != perftest.SendImm {
		return p.depErrOut(" Using SRQ only avavilible in SEND / SEND_IMM tests.\n")
	}
	if c.UseSRQ && c.NumQPs > c.RxDepth {
		return p.depErrOut(" Using SRQ depth should be greater than number of QPs.\n")
	}
	if c.DataValidation {
		if err := p.dataValidationDeps(); err != nil {
			return err
		}
	}

	if c.PostList > 1 {
		if !bw {
			return p.depErr("Post list is supported in BW tests only\n")
		}
		if !p.durationMode && c.Iters%uint64(c.PostList) != 0 {
			return p.depErr("Number of iterations must be a multiple of post list size\n")
		}
		if !p.reqCQMod {
			c.CQMod = c.PostList
			_ = reports.WritePostListCQMod(p.stdout)
		} else if c.PostList%c.CQMod != 0 {
			return p.depErr("Post list size must be a multiple of CQ moderation\n")
		}
	}
	if c.RecvPostList > 1 {
		if !bw {
			return p.depErr("Receive post list is supported in BW tests only\n")
		}
		if !p.durationMode && c.Iters%uint64(c.RecvPostList) != 0 {
			return p.depErr("Number of iterations must be a multiple of receive post list size\n")
		}
	}

	if p.durationMode {
		// Iterations become the counter of completions in the window.
		c.Iters = 0
		p.noPeak(bw)
		if c.Events {
			return p.depErr("Duration mode doesn't work with events.\n")
		}
		if p.method == runAll {
			return p.depErr("Duration mode currently doesn't support running on all sizes.\n")
		}
	}
	if !p.durationMode && c.CPUUtil {
		fmt.Fprint(p.stdout, reports.ResultLine)
		fmt.Fprint(p.stderr, " CPU Utilization works only with Duration mode.\n")
	}

	if p.rawEth {
		// perftest's checks of a Raw Ethernet run, in its order: the
		// first that can fail without -B (which pvperf does not take)
		// is the source MAC's.
		switch {
		case p.method == runAll:
			return p.exitErr("Raw Ethernet tests do not support -a / --all flag.\n")
		case c.RdmaCM || c.CMExchange:
			return p.exitErr(" RDMA CM isn't supported for Raw Ethernet tests\n")
		case c.GIDIndex >= 0:
			return p.exitErr(" GID index isn't supported for Raw Ethernet tests\n")
		}
		return p.depErr(" Invalid Command line.\n you must enter source mac by this format -B XX:XX:XX:XX:XX:XX\n")
	}
	if c.RdmaCM {
		c.CMExchange = true
		if c.Connection == perftest.UC {
			return p.depErrOut(" UC is not supported in librdmacm\n")
		}
		// perftest's server learns a UD client's address from a first
		// datagram; pvperf does not send or take it yet.
		if c.Connection == perftest.UD && (lat || c.Bidirectional) {
			return p.exitErr(" -R/--rdma_cm with UD runs unidirectional bandwidth tests only in pvperf (the UD address message of latency and bidirectional tests is not implemented)\n")
		}
	}
	if p.tos != -1 && !c.RdmaCM {
		return p.stdoutExit(" TOS only valid for rdma_cm based QP and RawEth QP \n")
	}
	if p.hopLimit != 64 {
		return p.stdoutExit(" Hop limit only valid for RawEth QP \n")
	}

	// A unidirectional receiver counts completions as they arrive: it has
	// no posting times to compute a peak from.
	if recv && bw && !p.client && !c.Bidirectional {
		p.noPeak(true)
	}
	if p.method == runInfinitely {
		if err := p.runInfinitelyDeps(); err != nil {
			return err
		}
	}

	if c.Events && p.verb == perftest.Write {
		return p.depErr(" Events feature not available on WRITE verb\n")
	}
	if c.Output != perftest.OutputFull {
		if bw && c.Output != perftest.OutputBandwidth && c.Output != perftest.OutputMessageRate {
			return p.depErr(" Output verbosity level for BW can be: bandwidth, message_rate\n")
		}
		if lat && c.Output != perftest.OutputLatency {
			return p.depErr(" Output verbosity level for LAT can be: latency\n")
		}
	}
	if c.LatencyGap > 0 && !lat {
		return p.depErr(" Latency gap feature is only for latency tests\n")
	}
	if p.durationMode && p.margin == -1 {
		p.margin = p.duration / 4
	}

	// perftest's workaround for odd receive depths.
	if recv && c.RxDepth%2 == 1 && p.method == runRegular {
		c.RxDepth++
	}
	// The peak is an O(n²) search: perftest skips it for long runs.
	if !p.durationMode && c.Iters > 20000 && !c.NoPeak && bw {
		p.noPeak(true)
	}
	if p.duration <= 2*p.margin {
		return p.depErr("please check that DURATION > 2*MARGIN\n")
	}
	// perftest posts nothing (and waits for ever) when a list does not fit
	// in its queue: refused here.
	if c.PostList > c.TxDepth {
		return p.depErr(" Post list size (%d) is larger than the send queue depth (%d): nothing could be posted (raise -t or lower -l)\n", c.PostList, c.TxDepth)
	}
	if recv && bw {
		perQP := c.RxDepth
		if c.UseSRQ {
			perQP /= c.NumQPs
		}
		if c.RecvPostList > perQP {
			return p.depErr(" Receive post list size (%d) is larger than the receive queue depth per QP (%d): no receive could be posted (raise -r or lower --recv_post_list)\n", c.RecvPostList, perQP)
		}
	}
	if !c.Events && p.useEqNum {
		return p.exitErr(" Events must be enabled to select a completion vector\n")
	}

	// perftest's send_bw (and write_bw --write_with_imm) exchange no
	// results in a bidirectional duration run, and print a remote row
	// that was never filled in: refused here.
	if c.ReportBoth && c.Bidirectional && p.durationMode &&
		(p.verb == perftest.Send || p.verb == perftest.SendImm || p.verb == perftest.WriteImm) {
		name := p.test.name
		if p.verb == perftest.WriteImm {
			name += " --write_with_imm"
		}
		return p.exitErr(" --report-both: a bidirectional %s run with -D exchanges no results, so there is no remote result to report\n", name)
	}
	// perftest's main only checks for the SEND verb here, not SEND_IMM.
	if (!p.durationMode && c.Iters < 3000) || (bw && c.Bidirectional && p.verb == perftest.Send) || lat {
		_ = reports.WriteDynamicPollingDisabled(p.stdout)
		p.cfg.DynamicPolling = false
	}
	if !p.cfg.DynamicPolling && !p.useCQEPoll && c.NumQPs > 2048 && c.Size > 8192 {
		p.cfg.PollBatch = 64
		_ = reports.WritePollBatchIncreased(p.stdout, p.cfg.PollBatch)
	}

	c.Verb = p.verb
	c.SizeGiven = p.reqSize
	c.AllSizes = p.method == runAll
	if p.durationMode {
		c.Duration = p.duration
		c.Margin = p.margin
	} else {
		c.Margin = max(p.margin, 0)
	}
	if c.OutReads < 0 {
		c.OutReads = 0 // perftest: "<= 0" means the device's maximum
	}
	return nil
}

// runInfinitelyDeps is perftest's check of --run_infinitely (its
// messages, in its order), then pvperf's own limits: pvperf runs it on
// the RDMA bandwidth tests, whose client sends and whose server waits.
func (p *parser) runInfinitelyDeps() error {
	c := &p.cfg
	bw := p.test.bw()
	p.noPeak(bw)
	if !p.durationMode {
		p.durationMode = true
		if p.margin == -1 {
			p.margin = p.duration / 4
		}
	}
	switch {
	case c.Events:
		return p.depErr(" run_infinitely does not support events feature yet.\n")
	case !bw:
		return p.depErr(" run_infinitely exists only in BW tests for now.\n")
	case c.Bidirectional && p.verb.HasReceives():
		return p.depErr(" run_infinitely mode is not supported in SEND, SEND_IMM or WRITE_IMM Bidirectional BW test\n")
	case p.verb == perftest.WriteImm:
		return p.exitErr(" --run_infinitely does not go with --write_with_imm in pvperf (the endless loop of a receiving server is not implemented)\n")
	case p.verb.HasReceives():
		return p.exitErr(" --run_infinitely runs write_bw, read_bw and atomic_bw in pvperf (the endless loop of a receiving server is not implemented)\n")
	case c.Bidirectional:
		return p.exitErr(" --run_infinitely runs unidirectional tests only in pvperf (-b is not implemented with it)\n")
	case c.Repeat > 1 || c.JSON || c.CSVFile != "" || c.HTMLFile != "" || c.IntervalJSON != "" || c.LimitBWSet || c.LimitMsgRate > 0:
		return p.exitErr(" --run_infinitely prints a row per period and no result at its end: --repeat, --out_json, --out_csv, --out_html, --interval_json and the limits (-w, -y) do not go with it\n")
	}
	c.RunInfinitely = true
	return nil
}

// noPeak disables the BW peak, warning (on BW tests) when it was on.
func (p *parser) noPeak(warn bool) {
	if !p.cfg.NoPeak && warn {
		_ = reports.WritePeakWarning(p.stdout)
	}
	p.cfg.NoPeak = true
}

// stdoutExit prints msg to stdout, for the checks perftest reports there
// before exiting.
func (p *parser) stdoutExit(msg string) error {
	fmt.Fprint(p.stdout, msg)
	return &Failure{Msg: msg}
}

// dataValidationDeps is perftest's check of --data_validation against the
// other options (its messages, in its order), then pvperf's own limits.
func (p *parser) dataValidationDeps() error {
	c := &p.cfg
	switch {
	case p.verb != perftest.Write && p.verb != perftest.Read:
		return p.depErr(" --data_validation is only supported with WRITE or READ verb\n")
	case !p.test.bw():
		return p.depErr(" --data_validation is only supported in bandwidth tests\n")
	case c.PostList > 1:
		return p.depErr(" --data_validation is incompatible with --post_list > 1\n")
	case p.method == runInfinitely:
		return p.depErr(" --data_validation is incompatible with --run_infinitely\n")
	case c.Connection != perftest.RC:
		return p.depErr(" --data_validation requires RC connection type\n")
	case c.PayloadFile != "":
		return p.depErr(" --data_validation is incompatible with payload modification\n")
	case p.method == runAll:
		return p.depErr(" --data_validation is incompatible with -a (run all sizes)\n")
	case c.TxDepth < 32:
		return p.depErr(" --data_validation requires tx_depth >= 32 (use -t)\n")
	}
	if c.DataValidationDebug {
		ops, cpq := bench.DataValidationChunks(c.Size, c.TxDepth, c.NumQPs, p.verb == perftest.Read)
		chunk := c.Size * uint64(ops)
		fmt.Fprintf(p.stdout, "[DATA_VALIDATION] validation_chunk_size=%d (tx_depth=%d), chunk_bytes=%d, chunks_per_qp=%d, ring_size=%d bytes\n",
			ops, c.TxDepth, chunk, cpq, chunk*uint64(cpq))
	}
	return nil
}
