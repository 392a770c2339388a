package reports

// perftest's format strings, verbatim (src/perftest_parameters.h and
// src/perftest_communication.h of 6.29 unless named 606), rendered by
// cSprintf. PRIu64 is "lu" on x86-64 Linux.
//
// Where written descriptions of perftest's output and the captured runs
// (testdata/perftest-*) disagree, the captures win:
//
//   - §3.4 gives the BW row as "...%-7.2lf\t\t     %-7.6lf" and says only the
//     labels changed before 6.22 (MB/sec). 6.06 also has three spaces, not
//     five, after the two tabs (reportFmt606; captures perftest-6.06/*_bw).
//   - §3.2 says older builds print only " PCIe relax order: ON"; 6.06 also
//     prints " ibv_wr* API     : OFF" alone on its line, and has no
//     CQE Poll Batch and no NUMA node line (all 6.06 captures).
//   - §2.2/§3.1 say -D and the receiving server of SEND BW print
//     " WARNING: BW peak won't be measured in this run."; 6.06 does not
//     (perftest-6.06/write_bw_D, send_bw server), 6.29 does
//     (perftest-6.29/send_bw server). Likewise "Disabling dynamic polling"
//     is 6.29 only.
//   - §2.3 lists "Device not recognized to implement inline feature.
//     Disabling it" under -I; perftest prints it for every READ/ATOMIC
//     test on an unknown device (they set the inline size to 0), on stderr
//     after a RESULT_LINE on stdout (perftest-*/read_*, atomic_*).
//   - §3.1 lists the pre-header lines in printing order; in the captures
//     stderr lines come first, because stdout was a fully buffered pipe.
//   - The captures' README says 6.06 picks GID index 0 without -x; its
//     write_bw_nogid capture shows "GID index : 1", as §6.3's scoring
//     predicts (the IPv4-mapped GID).
//
// Found in perftest's source, not in the spec: a build with neither
// relaxed ordering nor the thread-domain API prints "Lock-free\t: "
// (relaxLockUnsupported); 6.06 shows RX depth for SEND only, not SEND_IMM
// or WRITE_IMM; the inc_accuracy row of a bidirectional run is chosen from
// the local average before the remote one is added (NewBWRow).

// ResultLine is perftest's RESULT_LINE: 87 dashes and a newline.
const ResultLine = "---------------------------------------------------------------------------------------\n"

// ResultLinePerPort is RESULT_LINE_PER_PORT (--report-per-port): 163 dashes.
const ResultLinePerPort = "-------------------------------------------------------------------------------------------------------------------------------------------------------------------\n"

const (
	resultFmt            = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
	resultFmtPerPort     = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]   BW Port1[MiB/sec]   MsgRate Port1[Mpps]   BW Port2[MiB/sec]   MsgRate Port2[Mpps]"
	resultFmtG           = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	resultFmtGPerPort    = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]"
	resultFmt606         = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtPerPort606  = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   BW Port1[MB/sec]   MsgRate Port1[Mpps]   BW Port2[MB/sec]   MsgRate Port2[Mpps]"
	resultFmtLat         = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
	resultFmtLatDur      = " #bytes        #iterations       t_avg[usec]    tps average"
	resultExt            = "\n"
	resultExtCPUUtil     = "    CPU_Util[%]\n" // printf'ed as a format: "%%" prints "%"
	reportFmt            = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
	reportFmt606         = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf"
	reportFmtExt         = " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf"
	reportFmtPerPort     = " %-7lu    %-10lu     %-7.2lf            %-7.2lf\t\t   %-7.6lf        %-7.2lf            %-7.6lf              %-7.2lf            %-7.6lf"
	reportExt            = "\n"
	reportExtCPUUtil     = "\t    %-3.2f\n"
	reportFmtLat         = " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"
	reportFmtLatDur      = " %-7lu       %lu            %-7.2f        %-7.2f"
	basicAddrFmt         = " %s address: LID %#04x QPN %#06x PSN %#06x"
	readFmt              = " OUT %#04x"
	rdmaFmt              = " RKey %#08x VAddr %#016llx"
	srqnFmt              = " SRQn %#08x" // XRC_FMT and DC_FMT
	perfGIDFmt           = " %s: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d\n"
	waitingBanner        = "\n************************************\n* Waiting for client to connect... *\n************************************\n"
	samplesHeaderFmt     = "#, %s\n"
	sampleFmt            = "%d, %g\n"
	valueFmt             = "%lf\n"
	peakWarning          = " WARNING: BW peak won't be measured in this run.\n"
	dynamicPollingOff    = "Disabling dynamic polling\n"
	pollBatchIncreased   = "Increasing CQE polling batch to %d\n"
	postListCQMod        = "Post List requested - CQ moderation will be the size of the post list\n"
	largeMessageCQMod    = "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n"
	inlineNotRecognized  = "Device not recognized to implement inline feature. Disabling it\n"
	udSizeClamped        = " Max msg size in UD is MTU %lu\n Changing to this MTU\n"
	localResults         = "\n Local results: \n"
	remoteResults        = "\n Remote results: \n"
	localResultsAtomic   = "\n Local results:\n" // atomic_bw has no trailing space
	remoteResultsAtomic  = "\n Remote results:\n"
	roWarning            = " WARNING: CPU is not PCIe relaxed ordering compliant.\n WARNING: You should disable PCIe RO with `--disable_pcie_relaxed` for both server and client.\n"
	rdmaCMServerWaiting  = " Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP"
	headerTitleIndent    = "                    "
	relaxLockFmt         = " PCIe relax order: %s\t\tLock-free      : %s\n"
	relaxLockUnsupported = " PCIe relax order: %s\t\tLock-free\t: %s\n" // builds with neither RO nor the TD API
	wrAPIFmt             = " ibv_wr* API     : %s\t\tUsing Enhanced Reorder      : %s\n"
	relaxFmt606          = " PCIe relax order: %s\n"
	wrAPIFmt606          = " ibv_wr* API     : %s\n"
)
