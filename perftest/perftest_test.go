package perftest

import "testing"

// The numbers are perftest's C enumerations: they travel in the
// parameter negotiation, so a renumbering would break interoperation.
func TestNumbering(t *testing.T) {
	for _, c := range []struct {
		got, want int32
		what      string
	}{
		{int32(Send), 0, "SEND"}, {int32(SendImm), 1, "SEND_IMM"}, {int32(Write), 2, "WRITE"},
		{int32(WriteImm), 3, "WRITE_IMM"}, {int32(Read), 4, "READ"}, {int32(Atomic), 5, "ATOMIC"},
		{int32(Latency), 0, "LAT"}, {int32(Bandwidth), 1, "BW"}, {int32(LatencyByBW), 2, "LAT_BY_BW"},
		{int32(FlowSteeringRate), 3, "FS_RATE"},
		{int32(CmpAndSwap), 0, "CMP_AND_SWAP"}, {int32(FetchAndAdd), 1, "FETCH_AND_ADD"},
		{int32(RC), 0, "RC"}, {int32(UC), 1, "UC"}, {int32(UD), 2, "UD"}, {int32(RawEth), 3, "RawEth"},
		{int32(XRC), 4, "XRC"}, {int32(DC), 5, "DC"}, {int32(SRD), 6, "SRD"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, perftest's is %d", c.what, c.got, c.want)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Write.String(), "RDMA_Write"}, {WriteImm.String(), "RDMA_Write_imm"}, {SendImm.String(), "Send_imm"},
		{Verb(9).String(), "Verb(9)"}, {Verb(-1).String(), "Verb(-1)"},
		{Bandwidth.String(), "BW"}, {TestKind(7).String(), "TestKind(7)"},
		{FetchAndAdd.String(), "FETCH_AND_ADD"}, {CmpAndSwap.String(), "CMP_AND_SWAP"},
		{UD.String(), "UD"}, {Connection(8).String(), "Connection(8)"},
		{OutputMessageRate.String(), "message_rate"}, {OutputFull.String(), "full"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestVerbRules(t *testing.T) {
	recv := map[Verb]bool{Send: true, SendImm: true, WriteImm: true}
	whole := map[Verb]bool{Read: true, Atomic: true}
	for v := Send; v <= Atomic; v++ {
		if v.HasReceives() != recv[v] {
			t.Errorf("%v.HasReceives() = %v", v, v.HasReceives())
		}
		want := 2
		if whole[v] {
			want = 1
		}
		if v.RTTFactor() != want {
			t.Errorf("%v.RTTFactor() = %d, want %d", v, v.RTTFactor(), want)
		}
	}
}
