package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pvperf/pvperf/perftest"
)

// The rxe device of the captures, as ibv_query_device returned it.
var rxeAttr = DeviceAttr{
	FWVer:                 "0.0.0",
	NodeGUID:              0xd46dfdfffe92e0e4,
	SysImageGUID:          0xd46dfdfffe92e0e4,
	MaxMRSize:             0xffffffffffffffff,
	PageSizeCap:           0xfffff000,
	VendorID:              0xffffff,
	MaxQP:                 0xffff0,
	MaxQPWR:               0x100000,
	DeviceCapFlags:        0x01223c76,
	MaxSGE:                32,
	MaxSGERd:              32,
	MaxCQ:                 0x100000,
	MaxCQE:                0x7fff,
	MaxMR:                 0x7ffff,
	MaxPD:                 0x100000,
	MaxQPRdAtom:           128,
	MaxResRdAtom:          0x3f000,
	MaxQPInitRdAtom:       128,
	AtomicCap:             1, // IBV_ATOMIC_HCA
	MaxMW:                 0x7ffff,
	MaxMcastGrp:           8192,
	MaxMcastQPAttach:      56,
	MaxTotalMcastQPAttach: 0x70000,
	MaxAH:                 0x7fff,
	MaxSRQ:                0xdffff,
	MaxSRQWR:              0x100000,
	MaxSRQSGE:             27,
	MaxPKeys:              64,
	LocalCAAckDelay:       15,
	PhysPortCnt:           1,
}

func TestParseParamsCapture(t *testing.T) {
	c := loadCapture(t, "perftest-6.29/write_bw.txt")
	raw := c.side(true).params
	p, err := ParseParams(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := Params{
		TestMethod: RunRegular, ConnectionType: perftest.RC, Verb: perftest.Write, Tst: perftest.Bandwidth, AtomicType: perftest.CmpAndSwap,
		TestType: Iterations, ReportFmt: MBS, Size: 65536, Iters: 20, NumQPs: 1, Duration: 5,
		Attr: rxeAttr,
	}
	if p != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", p, want)
	}
	// max_qp_rd_atom: offset 224 of the negotiation struct, 144 of ibv_device_attr.
	if got := binary.LittleEndian.Uint32(raw[224:]); got != 128 {
		t.Errorf("raw max_qp_rd_atom at 224 = %d", got)
	}
	for _, size := range []int{ParamsSize, ParamsSizeNoMLX5DV} {
		b, err := want.Marshal(size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, raw[:size]) {
			t.Errorf("Marshal(%d) differs from the capture", size)
		}
		back, err := ParseParams(raw[:size])
		if err != nil || back != want {
			t.Errorf("ParseParams(%d bytes) = %+v, %v", size, back, err)
		}
	}
	withMask := want
	withMask.MLX5DVCompMask = 0x0102030405060708
	b, _ := withMask.Marshal(ParamsSize)
	if !bytes.Equal(b[312:], []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("mlx5dv_comp_mask bytes % x", b[312:])
	}
	b, _ = withMask.Marshal(ParamsSizeNoMLX5DV)
	if back, _ := ParseParams(b); back.MLX5DVCompMask != 0 {
		t.Error("312-byte form carries the mask")
	}
}

// TestParamsLayout pins every offset of the negotiation struct and of
// struct ibv_device_attr (x86_64) with distinct values.
func TestParamsLayout(t *testing.T) {
	p := Params{
		TestMethod: 0x01, ConnectionType: 0x02, Verb: 0x03, Tst: 0x04, AtomicType: 0x05, TestType: 0x06,
		ReportFmt: 0x07, Size: 0x0809, Iters: 0x0a0b, AESXTS: 0x0c, NumQPs: 0x0d, Duration: 0x0e,
		UseRDMACM: 0x0f, UseWriteWithImm: 0x10, NoEnhancedReorder: 0x11, SigOffload: 0x12, DataValidation: 0x13,
		MLX5DVCompMask: 0x14,
	}
	a := &p.Attr
	a.FWVer = "fw"
	a.NodeGUID, a.SysImageGUID, a.MaxMRSize, a.PageSizeCap = 0x6401, 0x4802, 0x5003, 0x5804
	u32 := []struct {
		off int
		p   *uint32
	}{{96, &a.VendorID}, {100, &a.VendorPartID}, {104, &a.HWVer}, {116, &a.DeviceCapFlags}, {164, &a.AtomicCap}}
	i32 := []struct {
		off int
		p   *int32
	}{
		{108, &a.MaxQP}, {112, &a.MaxQPWR}, {120, &a.MaxSGE}, {124, &a.MaxSGERd}, {128, &a.MaxCQ},
		{132, &a.MaxCQE}, {136, &a.MaxMR}, {140, &a.MaxPD}, {144, &a.MaxQPRdAtom}, {148, &a.MaxEERdAtom},
		{152, &a.MaxResRdAtom}, {156, &a.MaxQPInitRdAtom}, {160, &a.MaxEEInitRdAtom}, {168, &a.MaxEE},
		{172, &a.MaxRDD}, {176, &a.MaxMW}, {180, &a.MaxRawIPv6QP}, {184, &a.MaxRawEthyQP},
		{188, &a.MaxMcastGrp}, {192, &a.MaxMcastQPAttach}, {196, &a.MaxTotalMcastQPAttach}, {200, &a.MaxAH},
		{204, &a.MaxFMR}, {208, &a.MaxMapPerFMR}, {212, &a.MaxSRQ}, {216, &a.MaxSRQWR}, {220, &a.MaxSRQSGE},
	}
	for _, f := range u32 {
		*f.p = uint32(0x10000 + f.off)
	}
	for _, f := range i32 {
		*f.p = int32(0x10000 + f.off)
	}
	a.MaxPKeys, a.LocalCAAckDelay, a.PhysPortCnt = 0xe0e1, 0xe2, 0xe3

	b, err := p.Marshal(ParamsSize)
	if err != nil {
		t.Fatal(err)
	}
	be, le := binary.BigEndian, binary.LittleEndian
	for i, want := range []uint32{1, 2, 3, 4, 5, 6, 7, 0} {
		if got := be.Uint32(b[4*i:]); got != want {
			t.Errorf("offset %d: %#x, want %#x", 4*i, got, want)
		}
	}
	if be.Uint64(b[32:]) != 0x0809 || be.Uint64(b[40:]) != 0x0a0b || be.Uint64(b[312:]) != 0x14 {
		t.Error("size, iters or mlx5dv_comp_mask misplaced")
	}
	for i, want := range []uint32{0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13} {
		if got := be.Uint32(b[48+4*i:]); got != want {
			t.Errorf("offset %d: %#x, want %#x", 48+4*i, got, want)
		}
	}
	d := b[deviceAttrOffset : deviceAttrOffset+DeviceAttrSize]
	if string(d[:3]) != "fw\x00" || !bytes.Equal(d[2:64], make([]byte, 62)) {
		t.Errorf("fw_ver % x", d[:64])
	}
	if be.Uint64(d[64:]) != 0x6401 || be.Uint64(d[72:]) != 0x4802 || le.Uint64(d[80:]) != 0x5003 || le.Uint64(d[88:]) != 0x5804 {
		t.Error("GUIDs, max_mr_size or page_size_cap misplaced")
	}
	for _, f := range u32 {
		if got := le.Uint32(d[f.off:]); got != uint32(0x10000+f.off) {
			t.Errorf("attr offset %d: %#x", f.off, got)
		}
	}
	for _, f := range i32 {
		if got := le.Uint32(d[f.off:]); got != uint32(0x10000+f.off) {
			t.Errorf("attr offset %d: %#x", f.off, got)
		}
	}
	if le.Uint16(d[224:]) != 0xe0e1 || d[226] != 0xe2 || d[227] != 0xe3 || !bytes.Equal(d[228:], make([]byte, 4)) {
		t.Errorf("tail % x", d[224:])
	}
	if len(u32)+len(i32) != 32 {
		t.Errorf("%d 32-bit fields checked, want 32", len(u32)+len(i32))
	}
	back, err := ParseParams(b)
	if err != nil || back != p {
		t.Errorf("round trip:\n%+v\n%+v, %v", back, p, err)
	}
}

func TestParamsErrors(t *testing.T) {
	for _, n := range []int{0, 311, 313, 319, 321} {
		if _, err := ParseParams(make([]byte, n)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseParams(%d bytes): %v", n, err)
		}
	}
	var p Params
	if _, err := p.Marshal(300); !errors.Is(err, ErrMalformed) {
		t.Errorf("Marshal(300): %v", err)
	}
	p.Attr.FWVer = string(make([]byte, 65))
	if _, err := p.Marshal(ParamsSize); !errors.Is(err, ErrMalformed) {
		t.Errorf("65-byte fw_ver: %v", err)
	}
	p.Attr.FWVer = string(bytes.Repeat([]byte{'x'}, 64)) // no room for a NUL: allowed
	b, err := p.Marshal(ParamsSize)
	if err != nil {
		t.Fatal(err)
	}
	if back, _ := ParseParams(b); back.Attr.FWVer != p.Attr.FWVer {
		t.Errorf("64-byte fw_ver: %q", back.Attr.FWVer)
	}
}

func TestCompare(t *testing.T) {
	base := Params{
		TestMethod: RunRegular, ConnectionType: perftest.RC, Verb: perftest.Write, Tst: perftest.Bandwidth, TestType: Iterations,
		ReportFmt: MBS, Size: 65536, Iters: 5000, NumQPs: 1, Duration: 5,
	}
	tests := []struct {
		name   string
		modify func(l, r *Params)
		want   string
	}{
		{"equal", func(l, r *Params) {}, ""},
		{"attr ignored", func(l, r *Params) { r.Attr.MaxQPRdAtom = 1; r.MLX5DVCompMask = 1 }, ""},
		{"test_method", func(l, r *Params) { r.TestMethod = RunAll }, " test_method mismatch: local=RUN_REGULAR, remote=RUN_ALL\n"},
		{"connection_type", func(l, r *Params) { l.ConnectionType = perftest.UD; r.ConnectionType = perftest.SRD }, " connection_type mismatch: local=UD, remote=SRD\n"},
		{"verb", func(l, r *Params) { r.Verb = perftest.Read }, " verb mismatch: local=WRITE, remote=READ\n"},
		{"tst", func(l, r *Params) { r.Tst = perftest.Latency }, " tst mismatch: local=BW, remote=LAT\n"},
		{"atomicType", func(l, r *Params) { r.AtomicType = perftest.FetchAndAdd }, " atomicType mismatch: local=CMP_AND_SWAP, remote=FETCH_AND_ADD\n"},
		{"test_type", func(l, r *Params) { l.TestType = Duration }, " test_type mismatch: local=DURATION, remote=ITERATIONS\n"},
		{"report_fmt", func(l, r *Params) { l.ReportFmt = GBS }, " report_fmt mismatch: local=GBS, remote=MBS\n"},
		{"size", func(l, r *Params) { l.Size = 4096; r.Size = 8192 }, " size mismatch: local=4096, remote=8192\n"},
		{"iters", func(l, r *Params) { r.Iters = 0 }, " iters mismatch: local=5000, remote=0\n"},
		{"aes_xts", func(l, r *Params) { r.AESXTS = On }, " aes_xts mismatch: local=OFF, remote=ON\n"},
		{"num_of_qps", func(l, r *Params) { r.NumQPs = 2 }, " num_of_qps mismatch: local=1, remote=2\n"},
		{"num_of_qps negative", func(l, r *Params) { r.NumQPs = -1 }, " num_of_qps mismatch: local=1, remote=18446744073709551615\n"},
		{"duration", func(l, r *Params) { r.Duration = 10 }, " duration mismatch: local=5, remote=10\n"},
		{"use_rdma_cm", func(l, r *Params) { l.UseRDMACM = On }, " use_rdma_cm mismatch: local=ON, remote=OFF\n"},
		{"use_write_with_imm", func(l, r *Params) { l.UseWriteWithImm = On }, " use_write_with_imm mismatch: local=ON, remote=OFF\n"},
		{"no_enhanced_reorder", func(l, r *Params) { r.NoEnhancedReorder = On }, " no_enhanced_reorder mismatch: local=OFF, remote=ON\n"},
		{"sig_offload", func(l, r *Params) { r.SigOffload = On }, " sig_offload mismatch: local=OFF, remote=ON\n"},
		{"data_validation", func(l, r *Params) { r.DataValidation = On }, " data_validation mismatch: local=OFF, remote=ON\n"},
		{"order: first wins", func(l, r *Params) { r.Size = 1; r.Verb = perftest.Send; r.DataValidation = On }, " verb mismatch: local=WRITE, remote=SEND\n"},
		{"size before iters", func(l, r *Params) { r.Iters = 1; r.Size = 2 }, " size mismatch: local=65536, remote=2\n"},
		{"unnamed enum", func(l, r *Params) { r.Verb = 9 }, " verb mismatch: local=WRITE, remote=9\n"},
		{"unnamed flag", func(l, r *Params) { r.SigOffload = 2 }, " sig_offload mismatch: local=OFF, remote=2\n"},
	}
	for _, tt := range tests {
		l, r := base, base
		tt.modify(&l, &r)
		err := Compare(&l, &r)
		if got := PerftestMessage(err); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
		if (err != nil) != (tt.want != "") || (err != nil && !errors.Is(err, ErrMismatch)) {
			t.Errorf("%s: error %v", tt.name, err)
		}
	}
	err := Compare(&Params{Size: 1}, &Params{Size: 2})
	if got, want := err.Error(), "oob: negotiate: size mismatch: local=1, remote=2"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestOutReadsForPeer(t *testing.T) {
	remote := &DeviceAttr{MaxQPRdAtom: 16}
	if n, changed := OutReadsForPeer(128, perftest.RC, remote); n != 16 || !changed {
		t.Errorf("RC: %d %v", n, changed)
	}
	if n, changed := OutReadsForPeer(128, perftest.DC, remote); n != 128 || changed {
		t.Errorf("DC: %d %v", n, changed)
	}
	if n, changed := OutReadsForPeer(8, perftest.RC, remote); n != 8 || changed {
		t.Errorf("smaller: %d %v", n, changed)
	}
}

func TestEnumNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{RunInfinitely.String(), "RUN_INFINITELY"},
		{enumName(connTypeNames, int32(perftest.RawEth)), "RawEth"},
		{enumName(connTypeNames, int32(perftest.XRC)), "XRC"},
		{enumName(connTypeNames, int32(perftest.DC)), "DC"},
		{enumName(verbNames, int32(perftest.SendImm)), "SEND_IMM"},
		{enumName(verbNames, int32(perftest.WriteImm)), "WRITE_IMM"},
		{enumName(verbNames, int32(perftest.Atomic)), "ATOMIC"},
		{enumName(testKindNames, int32(perftest.LatencyByBW)), "LAT_BY_BW"},
		{enumName(testKindNames, int32(perftest.FlowSteeringRate)), "FS_RATE"},
		{enumName(testKindNames, 4), "4"},
		{enumName(testKindNames, -1), "-1"},
	} {
		if tt.got != tt.want {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
}
