package reports

// perftest's format strings, verbatim (src/perftest_parameters.h and
// src/perftest_communication.h of 6.29 unless named 606), rendered by
// cSprintf. PRIu64 is "lu" on x86-64 Linux.

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
	clientClosed         = " Client closed connection\n"
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
