//go:build linux

package uverbs

import (
	"testing"

	"github.com/pvperf/pvperf/internal/abitest"
)

// TestABILayouts pins every command struct to the kernel's layout
// (ib_user_verbs.h, offsets as the ABI reference tabulates them).
func TestABILayouts(t *testing.T) {
	for _, c := range []struct {
		v    any
		size int
		offs map[string]int
	}{
		{respOnly{}, 8, map[string]int{"Response": 0}},
		{ioctlHdr{}, ioctlHdrSize, map[string]int{
			"Length": 0, "ObjectID": 2, "MethodID": 4, "NumAttrs": 6, "Reserved1": 8, "DriverID": 16, "Reserved2": 20,
		}},
		{ioctlAttr{}, ioctlAttrSize, map[string]int{"AttrID": 0, "Len": 2, "Flags": 4, "AttrData": 6, "Data": 8}},
		{gidEntryABI{}, gidEntrySize, map[string]int{"GID": 0, "GIDIndex": 16, "PortNum": 20, "GIDType": 24, "NetdevIfindex": 28}},
		{getContextResp{}, 8, map[string]int{"AsyncFD": 0, "NumCompVectors": 4}},
		{queryDeviceResp{}, 176, map[string]int{
			"FWVer": 0, "NodeGUID": 8, "SysImageGUID": 16, "MaxMRSize": 24, "PageSizeCap": 32,
			"VendorID": 40, "VendorPartID": 44, "HWVer": 48, "MaxQP": 52, "MaxQPWR": 56,
			"DeviceCapFlags": 60, "MaxSGE": 64, "MaxSGERd": 68, "MaxCQ": 72, "MaxCQE": 76,
			"MaxMR": 80, "MaxPD": 84, "MaxQPRdAtom": 88, "MaxEERdAtom": 92, "MaxResRdAtom": 96,
			"MaxQPInitRdAtom": 100, "MaxEEInitRdAtom": 104, "AtomicCap": 108, "MaxEE": 112,
			"MaxRDD": 116, "MaxMW": 120, "MaxRawIPv6QP": 124, "MaxRawEthyQP": 128,
			"MaxMcastGrp": 132, "MaxMcastQPAttach": 136, "MaxTotalMcastQPAttach": 140,
			"MaxAH": 144, "MaxFMR": 148, "MaxMapPerFMR": 152, "MaxSRQ": 156, "MaxSRQWR": 160,
			"MaxSRQSGE": 164, "MaxPKeys": 168, "LocalCAAckDelay": 170, "PhysPortCnt": 171,
		}},
		{queryPortReq{}, 16, map[string]int{"Response": 0, "PortNum": 8}},
		{queryPortResp{}, 40, map[string]int{
			"PortCapFlags": 0, "MaxMsgSz": 4, "BadPKeyCntr": 8, "QKeyViolCntr": 12, "GIDTblLen": 16,
			"PKeyTblLen": 20, "LID": 22, "SMLID": 24, "State": 26, "MaxMTU": 27, "ActiveMTU": 28,
			"LMC": 29, "MaxVLNum": 30, "SMSL": 31, "SubnetTimeout": 32, "InitTypeReply": 33,
			"ActiveWidth": 34, "ActiveSpeed": 35, "PhysState": 36, "LinkLayer": 37, "Flags": 38,
		}},
		{allocPDResp{}, 4, map[string]int{"PDHandle": 0}},
		{handleOnly{}, 4, map[string]int{"Handle": 0}},
		{regMRReq{}, 40, map[string]int{"Response": 0, "Start": 8, "Length": 16, "HCAVA": 24, "PDHandle": 32, "AccessFlags": 36}},
		{regMRResp{}, 12, map[string]int{"MRHandle": 0, "LKey": 4, "RKey": 8}},
		{compChannelResp{}, 4, map[string]int{"FD": 0}},
		{createCQReq{}, 32, map[string]int{"Response": 0, "UserHandle": 8, "CQE": 16, "CompVector": 20, "CompChannel": 24}},
		{createCQResp{}, 8, map[string]int{"CQHandle": 0, "CQE": 4}},
		{destroyReq{}, 16, map[string]int{"Response": 0, "Handle": 8}},
		{destroyCQResp{}, 8, map[string]int{"CompEventsReported": 0, "AsyncEventsReported": 4}},
		{reqNotifyCQ{}, 8, map[string]int{"CQHandle": 0, "SolicitedOnly": 4}},
		{createQPReq{}, 56, map[string]int{
			"Response": 0, "UserHandle": 8, "PDHandle": 16, "SendCQHandle": 20, "RecvCQHandle": 24,
			"SRQHandle": 28, "MaxSendWR": 32, "MaxRecvWR": 36, "MaxSendSGE": 40, "MaxRecvSGE": 44,
			"MaxInlineData": 48, "SQSigAll": 52, "QPType": 53, "IsSRQ": 54,
		}},
		{createQPResp{}, 32, map[string]int{
			"QPHandle": 0, "QPN": 4, "MaxSendWR": 8, "MaxRecvWR": 12, "MaxSendSGE": 16,
			"MaxRecvSGE": 20, "MaxInlineData": 24,
		}},
		{qpDest{}, 32, map[string]int{
			"DGID": 0, "FlowLabel": 16, "DLID": 20, "SGIDIndex": 24, "HopLimit": 25,
			"TrafficClass": 26, "SL": 27, "SrcPathBits": 28, "StaticRate": 29, "IsGlobal": 30, "PortNum": 31,
		}},
		{modifyQP{}, 112, map[string]int{
			"Dest": 0, "AltDest": 32, "QPHandle": 64, "AttrMask": 68, "QKey": 72, "RQPSN": 76,
			"SQPSN": 80, "DestQPNum": 84, "QPAccessFlags": 88, "PKeyIndex": 92, "AltPKeyIndex": 94,
			"QPState": 96, "CurQPState": 97, "PathMTU": 98, "PathMigState": 99, "EnSQDAsyncNotify": 100,
			"MaxRdAtomic": 101, "MaxDestRdAtomic": 102, "MinRNRTimer": 103, "PortNum": 104,
			"Timeout": 105, "RetryCnt": 106, "RNRRetry": 107, "AltPortNum": 108, "AltTimeout": 109,
			"Dest.IsGlobal": 30, "AltDest.DGID": 32,
		}},
		{queryQPReq{}, 16, map[string]int{"Response": 0, "QPHandle": 8, "AttrMask": 12}},
		{queryQPResp{}, 128, map[string]int{
			"Dest": 0, "AltDest": 32, "MaxSendWR": 64, "MaxRecvWR": 68, "MaxSendSGE": 72,
			"MaxRecvSGE": 76, "MaxInlineData": 80, "QKey": 84, "RQPSN": 88, "SQPSN": 92,
			"DestQPNum": 96, "QPAccessFlags": 100, "PKeyIndex": 104, "AltPKeyIndex": 106,
			"QPState": 108, "CurQPState": 109, "PathMTU": 110, "PathMigState": 111,
			"SQDraining": 112, "MaxRdAtomic": 113, "MaxDestRdAtomic": 114, "MinRNRTimer": 115,
			"PortNum": 116, "Timeout": 117, "RetryCnt": 118, "RNRRetry": 119, "AltPortNum": 120,
			"AltTimeout": 121, "SQSigAll": 122,
		}},
		{destroyQPResp{}, 4, map[string]int{"EventsReported": 0}},
		{postSendReq{}, 24, map[string]int{"Response": 0, "QPHandle": 8, "WRCount": 12, "SGECount": 16, "WQESize": 20}},
		{createSRQReq{}, 32, map[string]int{"Response": 0, "UserHandle": 8, "PDHandle": 16, "MaxWR": 20, "MaxSGE": 24, "SRQLimit": 28}},
		{createSRQResp{}, 16, map[string]int{"SRQHandle": 0, "MaxWR": 4, "MaxSGE": 8, "SRQN": 12}},
		{modifySRQ{}, 16, map[string]int{"SRQHandle": 0, "AttrMask": 4, "MaxWR": 8, "SRQLimit": 12}},
		{querySRQReq{}, 16, map[string]int{"Response": 0, "SRQHandle": 8}},
		{querySRQResp{}, 16, map[string]int{"MaxWR": 0, "MaxSGE": 4, "SRQLimit": 8}},
		{createAHReq{}, 56, map[string]int{"Response": 0, "UserHandle": 8, "PDHandle": 16, "Attr": 24, "Attr.IsGlobal": 53}},
	} {
		abitest.Check(t, abitest.Struct{V: c.v, Size: c.size, Offs: c.offs})
	}
}
