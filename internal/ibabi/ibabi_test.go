package ibabi

import (
	"testing"

	"github.com/pvperf/pvperf/internal/abitest"
	"github.com/pvperf/pvperf/verbs"
)

// TestLayouts pins the structs to ib_user_verbs.h.
func TestLayouts(t *testing.T) {
	abitest.Check(t,
		abitest.Struct{V: AHAttr{}, Size: AHAttrSize, Offs: map[string]int{
			"DGID": 0, "FlowLabel": 16, "SGIDIndex": 20, "HopLimit": 21, "TrafficClass": 22, "Reserved": 23,
			"DLID": 24, "SL": 26, "SrcPathBits": 27, "StaticRate": 28, "IsGlobal": 29, "PortNum": 30, "Reserved2": 31,
		}, All: true},
		abitest.Struct{V: QPAttr{}, Size: QPAttrSize, Offs: map[string]int{
			"Mask": 0, "QPState": 4, "CurQPState": 8, "PathMTU": 12, "PathMigState": 16, "QKey": 20,
			"RQPSN": 24, "SQPSN": 28, "DestQPNum": 32, "AccessFlags": 36, "AH": 40, "AH.IsGlobal": 69, "AltAH": 72,
			"MaxSendWR": 104, "MaxRecvWR": 108, "MaxSendSGE": 112, "MaxRecvSGE": 116, "MaxInlineData": 120,
			"PKeyIndex": 124, "AltPKeyIndex": 126, "EnSQDAsyncNotify": 128, "SQDraining": 129,
			"MaxRdAtomic": 130, "MaxDestRdAtomic": 131, "MinRNRTimer": 132, "PortNum": 133, "Timeout": 134,
			"RetryCnt": 135, "RNRRetry": 136, "AltPortNum": 137, "AltTimeout": 138, "Reserved": 139,
		}},
	)
}

// TestAHAttrRoundTrip: an address vector survives the kernel layout.
func TestAHAttrRoundTrip(t *testing.T) {
	a := verbs.AHAttr{GRH: verbs.GRH{DGID: verbs.GID{0xfe, 0x80, 15: 2}, FlowLabel: 7, SGIDIndex: 1, HopLimit: 64, TrafficClass: 96},
		DLID: 3, SL: 2, SrcPathBits: 1, StaticRate: 4, IsGlobal: true, Port: 1}
	h := FromVerbs(&a)
	if h.IsGlobal != 1 || h.PortNum != 1 || h.DGID[0] != 0xfe {
		t.Errorf("kernel layout %+v", h)
	}
	if back := h.Verbs(); back != a {
		t.Errorf("round trip %+v, want %+v", back, a)
	}
}
