// Package ibabi holds the structs of include/uapi/rdma/ib_user_verbs.h that
// more than one kernel interface carries, with their conversions to package
// verbs' types: the address vector (ib_uverbs_ah_attr), in uverbs'
// CREATE_AH and in rdma_cm's events and QP attributes, and the QP
// attributes (ib_uverbs_qp_attr), rdma_cm's answer to INIT_QP_ATTR.
//
// The structs are declared field by field with explicit padding, so that
// their encoding with encoding/binary (little-endian, no implicit padding)
// is the kernel's layout; ibabi_test.go pins their sizes and offsets. The
// package holds no state.
package ibabi

import "github.com/pvperf/pvperf/verbs"

// AHAttr is struct ib_uverbs_ah_attr (32 bytes).
type AHAttr struct {
	DGID         [16]byte
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	Reserved     uint8
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   uint8
	IsGlobal     uint8
	PortNum      uint8
	Reserved2    uint8
}

// AHAttrSize is the size of AHAttr.
const AHAttrSize = 32

// FromVerbs returns a's kernel layout.
func FromVerbs(a *verbs.AHAttr) AHAttr {
	h := AHAttr{
		DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex, HopLimit: a.GRH.HopLimit,
		TrafficClass: a.GRH.TrafficClass, DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits,
		StaticRate: a.StaticRate, PortNum: a.Port,
	}
	if a.IsGlobal {
		h.IsGlobal = 1
	}
	return h
}

// Verbs returns h as package verbs' address vector.
func (h *AHAttr) Verbs() verbs.AHAttr {
	return verbs.AHAttr{
		GRH: verbs.GRH{
			DGID: verbs.GID(h.DGID), FlowLabel: h.FlowLabel, SGIDIndex: h.SGIDIndex,
			HopLimit: h.HopLimit, TrafficClass: h.TrafficClass,
		},
		DLID: h.DLID, SL: h.SL, SrcPathBits: h.SrcPathBits, StaticRate: h.StaticRate,
		IsGlobal: h.IsGlobal != 0, Port: h.PortNum,
	}
}

// QPAttr is struct ib_uverbs_qp_attr (144 bytes). Its mask bits are those
// of verbs.QPAttrMask.
type QPAttr struct {
	Mask             uint32
	QPState          uint32
	CurQPState       uint32
	PathMTU          uint32
	PathMigState     uint32
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPNum        uint32
	AccessFlags      uint32
	AH               AHAttr
	AltAH            AHAttr
	MaxSendWR        uint32
	MaxRecvWR        uint32
	MaxSendSGE       uint32
	MaxRecvSGE       uint32
	MaxInlineData    uint32
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify uint8
	SQDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	Reserved         [5]uint8
}

// QPAttrSize is the size of QPAttr.
const QPAttrSize = 144

// Verbs returns r as package verbs' attributes and mask (the alternate
// path is left out: nothing here migrates paths).
func (r *QPAttr) Verbs() (verbs.QPAttr, verbs.QPAttrMask) {
	a := verbs.QPAttr{
		State: verbs.QPState(r.QPState), CurState: verbs.QPState(r.CurQPState), PathMTU: verbs.MTU(r.PathMTU),
		QKey: r.QKey, RQPSN: r.RQPSN, SQPSN: r.SQPSN, DestQPN: r.DestQPNum, Access: verbs.Access(r.AccessFlags),
		Cap: verbs.QPCap{
			MaxSendWR: int(r.MaxSendWR), MaxRecvWR: int(r.MaxRecvWR), MaxSendSGE: int(r.MaxSendSGE),
			MaxRecvSGE: int(r.MaxRecvSGE), MaxInlineData: int(r.MaxInlineData),
		},
		AH:        r.AH.Verbs(),
		PKeyIndex: r.PKeyIndex, SQDrainNotify: r.EnSQDAsyncNotify != 0, SQDraining: r.SQDraining != 0,
		MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic, MinRNRTimer: r.MinRNRTimer,
		Port: r.PortNum, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
	}
	return a, verbs.QPAttrMask(r.Mask)
}
