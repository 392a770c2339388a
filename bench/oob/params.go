package oob

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/pvperf/pvperf/perftest"
)

// Sizes of the parameter-negotiation struct (struct
// perftest_parameters_negotiate on x86_64 and aarch64).
const (
	// ParamsSize is the struct of perftest built with mlx5dv (distribution
	// builds; every 6.29 capture shows it): it ends with mlx5dv_comp_mask.
	ParamsSize = 320
	// ParamsSizeNoMLX5DV is the struct of perftest built without mlx5dv.
	ParamsSizeNoMLX5DV = 312
	// DeviceAttrSize is the size of struct ibv_device_attr.
	DeviceAttrSize = 232
	// deviceAttrOffset is where the ibv_device_attr starts in the struct.
	deviceAttrOffset = 80
)

// TestMethod is perftest's enum ctx_test_method.
type TestMethod int32

// Test methods.
const (
	RunRegular    TestMethod = 0
	RunAll        TestMethod = 1 // -a
	RunInfinitely TestMethod = 2 // --run_infinitely
)

// TestType is perftest's TestMethod (the "test_type" field): iterations or
// duration.
type TestType int32

// Test types.
const (
	Iterations TestType = 0
	Duration   TestType = 1 // -D
)

// ReportFmt is perftest's enum ctx_report_fmt.
type ReportFmt int32

// Report formats.
const (
	GBS ReportFmt = 0 // --report_gbits
	MBS ReportFmt = 1
)

// OnOff is a C int used as a flag (OFF = 0, ON = 1).
type OnOff int32

// Flag values.
const (
	Off OnOff = 0
	On  OnOff = 1
)

var (
	testMethodNames = []string{"RUN_REGULAR", "RUN_ALL", "RUN_INFINITELY"}
	connTypeNames   = []string{"RC", "UC", "UD", "RawEth", "XRC", "DC", "SRD"}
	verbNames       = []string{"SEND", "SEND_IMM", "WRITE", "WRITE_IMM", "READ", "ATOMIC"}
	testKindNames   = []string{"LAT", "BW", "LAT_BY_BW", "FS_RATE"}
	atomicNames     = []string{"CMP_AND_SWAP", "FETCH_AND_ADD"}
	testTypeNames   = []string{"ITERATIONS", "DURATION"}
	reportFmtNames  = []string{"GBS", "MBS"}
	onOffNames      = []string{"OFF", "ON"}
)

// enumName returns names[v], or the number for values perftest has no name
// for (perftest would index past its array).
func enumName(names []string, v int32) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return strconv.Itoa(int(v))
}

func (v TestMethod) String() string { return enumName(testMethodNames, int32(v)) }
func (v TestType) String() string   { return enumName(testTypeNames, int32(v)) }
func (v ReportFmt) String() string  { return enumName(reportFmtNames, int32(v)) }
func (v OnOff) String() string      { return enumName(onOffNames, int32(v)) }

// Params is the parameter-negotiation struct (perftest 6.28+): the settings
// both sides must agree on, the local device attributes and, in the 320-byte
// form, the mlx5dv capability mask. All fields travel big-endian except
// Attr, which travels in host order (see [DeviceAttr]).
type Params struct {
	TestMethod        TestMethod          // offset 0
	ConnectionType    perftest.Connection // 4
	Verb              perftest.Verb       // 8
	Tst               perftest.TestKind   // 12
	AtomicType        perftest.AtomicType // 16
	TestType          TestType            // 20
	ReportFmt         ReportFmt           // 24; 4 bytes of padding follow
	Size              uint64              // 32: message size after MTU/perftest.UD clipping (8388608 with -a)
	Iters             uint64              // 40: 0 with -D
	AESXTS            OnOff               // 48
	NumQPs            int32               // 52
	Duration          int32               // 56: 5 unless -D
	UseRDMACM         OnOff               // 60: -z or -R
	UseWriteWithImm   OnOff               // 64: always 0 in perftest
	NoEnhancedReorder OnOff               // 68
	SigOffload        OnOff               // 72
	DataValidation    OnOff               // 76
	Attr              DeviceAttr          // 80: 232 bytes, host order
	MLX5DVCompMask    uint64              // 312: only in the 320-byte form; 0 for non-Mellanox devices
}

// Marshal returns the struct as perftest sends it, in the given size
// ([ParamsSize] or [ParamsSizeNoMLX5DV]). Padding is zero.
func (p *Params) Marshal(size int) ([]byte, error) {
	if size != ParamsSize && size != ParamsSizeNoMLX5DV {
		return nil, fmt.Errorf("oob: encode params: size %d, want %d or %d: %w", size, ParamsSize, ParamsSizeNoMLX5DV, ErrMalformed)
	}
	b := make([]byte, size)
	be := binary.BigEndian
	for i, v := range []int32{int32(p.TestMethod), int32(p.ConnectionType), int32(p.Verb), int32(p.Tst),
		int32(p.AtomicType), int32(p.TestType), int32(p.ReportFmt)} {
		be.PutUint32(b[4*i:], uint32(v))
	}
	be.PutUint64(b[32:], p.Size)
	be.PutUint64(b[40:], p.Iters)
	for i, v := range []int32{int32(p.AESXTS), p.NumQPs, p.Duration, int32(p.UseRDMACM), int32(p.UseWriteWithImm),
		int32(p.NoEnhancedReorder), int32(p.SigOffload), int32(p.DataValidation)} {
		be.PutUint32(b[48+4*i:], uint32(v))
	}
	attr, err := p.Attr.Marshal()
	if err != nil {
		return nil, fmt.Errorf("oob: encode params: %w", err)
	}
	copy(b[deviceAttrOffset:], attr[:])
	if size == ParamsSize {
		be.PutUint64(b[312:], p.MLX5DVCompMask)
	}
	return b, nil
}

// ParseParams decodes a negotiation struct of 320 or 312 bytes. Padding is
// ignored; MLX5DVCompMask is 0 in the 312-byte form.
func ParseParams(b []byte) (Params, error) {
	var p Params
	if len(b) != ParamsSize && len(b) != ParamsSizeNoMLX5DV {
		return p, fmt.Errorf("oob: decode params: %d bytes, want %d or %d: %w", len(b), ParamsSize, ParamsSizeNoMLX5DV, ErrMalformed)
	}
	be := binary.BigEndian
	i32 := func(off int) int32 { return int32(be.Uint32(b[off:])) }
	p.TestMethod = TestMethod(i32(0))
	p.ConnectionType = perftest.Connection(i32(4))
	p.Verb = perftest.Verb(i32(8))
	p.Tst = perftest.TestKind(i32(12))
	p.AtomicType = perftest.AtomicType(i32(16))
	p.TestType = TestType(i32(20))
	p.ReportFmt = ReportFmt(i32(24))
	p.Size = be.Uint64(b[32:])
	p.Iters = be.Uint64(b[40:])
	p.AESXTS = OnOff(i32(48))
	p.NumQPs = i32(52)
	p.Duration = i32(56)
	p.UseRDMACM = OnOff(i32(60))
	p.UseWriteWithImm = OnOff(i32(64))
	p.NoEnhancedReorder = OnOff(i32(68))
	p.SigOffload = OnOff(i32(72))
	p.DataValidation = OnOff(i32(76))
	p.Attr = ParseDeviceAttr((*[DeviceAttrSize]byte)(b[deviceAttrOffset : deviceAttrOffset+DeviceAttrSize]))
	if len(b) == ParamsSize {
		p.MLX5DVCompMask = be.Uint64(b[312:])
	}
	return p, nil
}

// Compare compares the negotiated fields of the local and remote structs in
// perftest's order (test_method, connection_type, verb, tst, atomicType,
// test_type, report_fmt, size, iters, aes_xts, num_of_qps, duration,
// use_rdma_cm, use_write_with_imm, no_enhanced_reorder, sig_offload,
// data_validation) and returns the first difference as a *MismatchError
// (wrapping ErrMismatch), or nil. Enumerations print by name; size, iters,
// num_of_qps and duration print as perftest's %lu (an int is sign-extended
// first). Attr and MLX5DVCompMask are not compared (see [OutReadsForPeer]).
func Compare(local, remote *Params) error {
	type field struct {
		name  string
		l, r  int64
		names []string
	}
	fields := [...]field{
		{"test_method", int64(local.TestMethod), int64(remote.TestMethod), testMethodNames},
		{"connection_type", int64(local.ConnectionType), int64(remote.ConnectionType), connTypeNames},
		{"verb", int64(local.Verb), int64(remote.Verb), verbNames},
		{"tst", int64(local.Tst), int64(remote.Tst), testKindNames},
		{"atomicType", int64(local.AtomicType), int64(remote.AtomicType), atomicNames},
		{"test_type", int64(local.TestType), int64(remote.TestType), testTypeNames},
		{"report_fmt", int64(local.ReportFmt), int64(remote.ReportFmt), reportFmtNames},
		{"size", int64(local.Size), int64(remote.Size), nil},
		{"iters", int64(local.Iters), int64(remote.Iters), nil},
		{"aes_xts", int64(local.AESXTS), int64(remote.AESXTS), onOffNames},
		{"num_of_qps", int64(local.NumQPs), int64(remote.NumQPs), nil},
		{"duration", int64(local.Duration), int64(remote.Duration), nil},
		{"use_rdma_cm", int64(local.UseRDMACM), int64(remote.UseRDMACM), onOffNames},
		{"use_write_with_imm", int64(local.UseWriteWithImm), int64(remote.UseWriteWithImm), onOffNames},
		{"no_enhanced_reorder", int64(local.NoEnhancedReorder), int64(remote.NoEnhancedReorder), onOffNames},
		{"sig_offload", int64(local.SigOffload), int64(remote.SigOffload), onOffNames},
		{"data_validation", int64(local.DataValidation), int64(remote.DataValidation), onOffNames},
	}
	for _, f := range fields {
		if f.l == f.r {
			continue
		}
		e := &MismatchError{Field: f.name}
		if f.names != nil {
			e.Local, e.Remote = enumName(f.names, int32(f.l)), enumName(f.names, int32(f.r))
		} else {
			// uint64 conversion: perftest prints the uint64_t with %lu.
			e.Local = strconv.FormatUint(uint64(f.l), 10)
			e.Remote = strconv.FormatUint(uint64(f.r), 10)
		}
		return e
	}
	return nil
}

// OutReadsForPeer applies perftest's compare_ibv_device rule: unless the
// connection is DC, local out_reads larger than the remote device's
// max_qp_rd_atom is lowered to it; perftest then prints
// " out_reads is greater than remote max_qp_rd_atom, using remote max_qp_rd_atom\n"
// (to stdout). It returns the out_reads to use and whether it changed.
func OutReadsForPeer(outReads int, ct perftest.Connection, remote *DeviceAttr) (int, bool) {
	if ct != perftest.DC && outReads > int(remote.MaxQPRdAtom) {
		return int(remote.MaxQPRdAtom), true
	}
	return outReads, false
}

// DeviceAttr is struct ibv_device_attr as ibv_query_device returns it and
// as the negotiation struct carries it: in host byte order (little-endian
// on x86_64 and aarch64, the layouts are identical), except the GUIDs,
// which are __be64. Offsets are within the 232-byte struct.
type DeviceAttr struct {
	FWVer                 string // @0, char[64], NUL-padded
	NodeGUID              uint64 // @64, __be64
	SysImageGUID          uint64 // @72, __be64
	MaxMRSize             uint64 // @80
	PageSizeCap           uint64 // @88
	VendorID              uint32 // @96
	VendorPartID          uint32 // @100
	HWVer                 uint32 // @104
	MaxQP                 int32  // @108
	MaxQPWR               int32  // @112
	DeviceCapFlags        uint32 // @116
	MaxSGE                int32  // @120
	MaxSGERd              int32  // @124
	MaxCQ                 int32  // @128
	MaxCQE                int32  // @132
	MaxMR                 int32  // @136
	MaxPD                 int32  // @140
	MaxQPRdAtom           int32  // @144 (@224 of the negotiation struct)
	MaxEERdAtom           int32  // @148
	MaxResRdAtom          int32  // @152
	MaxQPInitRdAtom       int32  // @156
	MaxEEInitRdAtom       int32  // @160
	AtomicCap             uint32 // @164, enum ibv_atomic_cap
	MaxEE                 int32  // @168
	MaxRDD                int32  // @172
	MaxMW                 int32  // @176
	MaxRawIPv6QP          int32  // @180
	MaxRawEthyQP          int32  // @184
	MaxMcastGrp           int32  // @188
	MaxMcastQPAttach      int32  // @192
	MaxTotalMcastQPAttach int32  // @196
	MaxAH                 int32  // @200
	MaxFMR                int32  // @204
	MaxMapPerFMR          int32  // @208
	MaxSRQ                int32  // @212
	MaxSRQWR              int32  // @216
	MaxSRQSGE             int32  // @220
	MaxPKeys              uint16 // @224
	LocalCAAckDelay       uint8  // @226
	PhysPortCnt           uint8  // @227; 4 bytes of padding follow
}

// Marshal returns the 232 bytes of struct ibv_device_attr for a, as
// perftest sends them inside the negotiation struct. FWVer must fit in 64
// bytes; padding is zero.
func (a *DeviceAttr) Marshal() ([DeviceAttrSize]byte, error) {
	var b [DeviceAttrSize]byte
	if len(a.FWVer) > 64 {
		return b, fmt.Errorf("encode device attr: fw_ver is %d bytes, at most 64 fit: %w", len(a.FWVer), ErrMalformed)
	}
	le, be := binary.LittleEndian, binary.BigEndian
	copy(b[0:64], a.FWVer)
	be.PutUint64(b[64:], a.NodeGUID)
	be.PutUint64(b[72:], a.SysImageGUID)
	le.PutUint64(b[80:], a.MaxMRSize)
	le.PutUint64(b[88:], a.PageSizeCap)
	le.PutUint32(b[96:], a.VendorID)
	le.PutUint32(b[100:], a.VendorPartID)
	le.PutUint32(b[104:], a.HWVer)
	le.PutUint32(b[108:], uint32(a.MaxQP))
	le.PutUint32(b[112:], uint32(a.MaxQPWR))
	le.PutUint32(b[116:], a.DeviceCapFlags)
	le.PutUint32(b[120:], uint32(a.MaxSGE))
	le.PutUint32(b[124:], uint32(a.MaxSGERd))
	le.PutUint32(b[128:], uint32(a.MaxCQ))
	le.PutUint32(b[132:], uint32(a.MaxCQE))
	le.PutUint32(b[136:], uint32(a.MaxMR))
	le.PutUint32(b[140:], uint32(a.MaxPD))
	le.PutUint32(b[144:], uint32(a.MaxQPRdAtom))
	le.PutUint32(b[148:], uint32(a.MaxEERdAtom))
	le.PutUint32(b[152:], uint32(a.MaxResRdAtom))
	le.PutUint32(b[156:], uint32(a.MaxQPInitRdAtom))
	le.PutUint32(b[160:], uint32(a.MaxEEInitRdAtom))
	le.PutUint32(b[164:], a.AtomicCap)
	le.PutUint32(b[168:], uint32(a.MaxEE))
	le.PutUint32(b[172:], uint32(a.MaxRDD))
	le.PutUint32(b[176:], uint32(a.MaxMW))
	le.PutUint32(b[180:], uint32(a.MaxRawIPv6QP))
	le.PutUint32(b[184:], uint32(a.MaxRawEthyQP))
	le.PutUint32(b[188:], uint32(a.MaxMcastGrp))
	le.PutUint32(b[192:], uint32(a.MaxMcastQPAttach))
	le.PutUint32(b[196:], uint32(a.MaxTotalMcastQPAttach))
	le.PutUint32(b[200:], uint32(a.MaxAH))
	le.PutUint32(b[204:], uint32(a.MaxFMR))
	le.PutUint32(b[208:], uint32(a.MaxMapPerFMR))
	le.PutUint32(b[212:], uint32(a.MaxSRQ))
	le.PutUint32(b[216:], uint32(a.MaxSRQWR))
	le.PutUint32(b[220:], uint32(a.MaxSRQSGE))
	le.PutUint16(b[224:], a.MaxPKeys)
	b[226] = a.LocalCAAckDelay
	b[227] = a.PhysPortCnt
	return b, nil
}

// ParseDeviceAttr decodes the 232 bytes of a struct ibv_device_attr.
// FWVer ends at the first NUL; padding is ignored.
func ParseDeviceAttr(b *[DeviceAttrSize]byte) DeviceAttr {
	var a DeviceAttr
	le, be := binary.LittleEndian, binary.BigEndian
	fw := b[0:64]
	if i := bytes.IndexByte(fw, 0); i >= 0 {
		fw = fw[:i]
	}
	a.FWVer = string(fw)
	a.NodeGUID = be.Uint64(b[64:])
	a.SysImageGUID = be.Uint64(b[72:])
	a.MaxMRSize = le.Uint64(b[80:])
	a.PageSizeCap = le.Uint64(b[88:])
	a.VendorID = le.Uint32(b[96:])
	a.VendorPartID = le.Uint32(b[100:])
	a.HWVer = le.Uint32(b[104:])
	a.MaxQP = int32(le.Uint32(b[108:]))
	a.MaxQPWR = int32(le.Uint32(b[112:]))
	a.DeviceCapFlags = le.Uint32(b[116:])
	a.MaxSGE = int32(le.Uint32(b[120:]))
	a.MaxSGERd = int32(le.Uint32(b[124:]))
	a.MaxCQ = int32(le.Uint32(b[128:]))
	a.MaxCQE = int32(le.Uint32(b[132:]))
	a.MaxMR = int32(le.Uint32(b[136:]))
	a.MaxPD = int32(le.Uint32(b[140:]))
	a.MaxQPRdAtom = int32(le.Uint32(b[144:]))
	a.MaxEERdAtom = int32(le.Uint32(b[148:]))
	a.MaxResRdAtom = int32(le.Uint32(b[152:]))
	a.MaxQPInitRdAtom = int32(le.Uint32(b[156:]))
	a.MaxEEInitRdAtom = int32(le.Uint32(b[160:]))
	a.AtomicCap = le.Uint32(b[164:])
	a.MaxEE = int32(le.Uint32(b[168:]))
	a.MaxRDD = int32(le.Uint32(b[172:]))
	a.MaxMW = int32(le.Uint32(b[176:]))
	a.MaxRawIPv6QP = int32(le.Uint32(b[180:]))
	a.MaxRawEthyQP = int32(le.Uint32(b[184:]))
	a.MaxMcastGrp = int32(le.Uint32(b[188:]))
	a.MaxMcastQPAttach = int32(le.Uint32(b[192:]))
	a.MaxTotalMcastQPAttach = int32(le.Uint32(b[196:]))
	a.MaxAH = int32(le.Uint32(b[200:]))
	a.MaxFMR = int32(le.Uint32(b[204:]))
	a.MaxMapPerFMR = int32(le.Uint32(b[208:]))
	a.MaxSRQ = int32(le.Uint32(b[212:]))
	a.MaxSRQWR = int32(le.Uint32(b[216:]))
	a.MaxSRQSGE = int32(le.Uint32(b[220:]))
	a.MaxPKeys = le.Uint16(b[224:])
	a.LocalCAAckDelay = b[226]
	a.PhysPortCnt = b[227]
	return a
}
