//go:build linux

package rdmacm

import (
	"net/netip"
	"testing"

	"github.com/pvperf/pvperf/internal/abitest"
)

// TestABILayouts pins every struct to the kernel's layout
// (include/uapi/rdma/rdma_user_cm.h and ib_user_verbs.h of Linux 6.1;
// docs/rdmacm.md).
func TestABILayouts(t *testing.T) {
	ah := map[string]int{
		"DGID": 0, "FlowLabel": 16, "SGIDIndex": 20, "HopLimit": 21, "TrafficClass": 22, "Reserved": 23,
		"DLID": 24, "SL": 26, "SrcPathBits": 27, "StaticRate": 28, "IsGlobal": 29, "PortNum": 30, "Reserved2": 31,
	}
	conn := map[string]int{
		"QPNum": 0, "QKey": 4, "PrivateData": 8, "PrivateDataLen": 264, "SRQ": 265, "ResponderResources": 266,
		"InitiatorDepth": 267, "FlowControl": 268, "RetryCount": 269, "RNRRetryCount": 270, "Valid": 271,
	}
	nested := func(prefix string, base int, m map[string]int, more map[string]int) map[string]int {
		out := map[string]int{prefix: base}
		for k, v := range m {
			out[prefix+"."+k] = base + v
		}
		for k, v := range more {
			out[k] = v
		}
		return out
	}
	abitest.Check(t,
		abitest.Struct{V: cmdHdr{}, Size: cmdHdrSize, Offs: map[string]int{"Cmd": 0, "In": 4, "Out": 6}, All: true},
		abitest.Struct{V: createIDReq{}, Size: 24, Offs: map[string]int{"UID": 0, "Response": 8, "PS": 16, "QPType": 18, "Reserved": 19}, All: true},
		abitest.Struct{V: createIDResp{}, Size: 4, Offs: map[string]int{"ID": 0}, All: true},
		abitest.Struct{V: destroyIDReq{}, Size: 16, Offs: map[string]int{"Response": 0, "ID": 8, "Reserved": 12}, All: true},
		abitest.Struct{V: destroyIDResp{}, Size: 4, Offs: map[string]int{"EventsReported": 0}, All: true},
		abitest.Struct{V: bindReq{}, Size: 136, Offs: map[string]int{"ID": 0, "AddrSize": 4, "Reserved": 6, "Addr": 8}, All: true},
		abitest.Struct{V: resolveAddrReq{}, Size: 272, Offs: map[string]int{
			"ID": 0, "TimeoutMS": 4, "SrcSize": 8, "DstSize": 10, "Reserved": 12, "Src": 16, "Dst": 144}, All: true},
		abitest.Struct{V: resolveRouteReq{}, Size: 8, Offs: map[string]int{"ID": 0, "TimeoutMS": 4}, All: true},
		abitest.Struct{V: queryReq{}, Size: 16, Offs: map[string]int{"Response": 0, "ID": 8, "Option": 12}, All: true},
		abitest.Struct{V: queryAddrResp{}, Size: 280, Offs: map[string]int{
			"NodeGUID": 0, "PortNum": 8, "Reserved": 9, "PKey": 10, "SrcSize": 12, "DstSize": 14,
			"Src": 16, "Dst": 144, "IBDevIndex": 272, "Reserved1": 276}, All: true},
		abitest.Struct{V: connParam{}, Size: connParamSize, Offs: conn, All: true},
		abitest.Struct{V: udParam{}, Size: udParamSize, Offs: nested("AH", 8, ah, map[string]int{
			"QPNum": 0, "QKey": 4, "PrivateData": 40, "PrivateDataLen": 296, "Reserved": 297}), All: true},
		abitest.Struct{V: ece{}, Size: 8, Offs: map[string]int{"VendorID": 0, "AttrMod": 4}, All: true},
		abitest.Struct{V: connectReq{}, Size: 288, Offs: nested("Param", 0, conn, map[string]int{
			"ID": 272, "Reserved": 276, "ECE": 280, "ECE.VendorID": 280, "ECE.AttrMod": 284}), All: true},
		abitest.Struct{V: listenReq{}, Size: 8, Offs: map[string]int{"ID": 0, "Backlog": 4}, All: true},
		abitest.Struct{V: acceptReq{}, Size: 296, Offs: nested("Param", 8, conn, map[string]int{
			"UID": 0, "ID": 280, "Reserved": 284, "ECE": 288, "ECE.VendorID": 288, "ECE.AttrMod": 292}), All: true},
		abitest.Struct{V: rejectReq{}, Size: 264, Offs: map[string]int{
			"ID": 0, "PrivateDataLen": 4, "Reason": 5, "Reserved": 6, "PrivateData": 8}, All: true},
		abitest.Struct{V: disconnectReq{}, Size: 4, Offs: map[string]int{"ID": 0}, All: true},
		abitest.Struct{V: initQPAttrReq{}, Size: 16, Offs: map[string]int{"Response": 0, "ID": 8, "QPState": 12}, All: true},
		abitest.Struct{V: getEventReq{}, Size: 8, Offs: map[string]int{"Response": 0}, All: true},
		abitest.Struct{V: eventResp{}, Size: eventRespSize, Offs: map[string]int{
			"UID": 0, "ID": 8, "Event": 12, "Status": 16, "Param": 20, "Reserved": 324,
			"ECE": 328, "ECE.VendorID": 328, "ECE.AttrMod": 332}, All: true},
		abitest.Struct{V: setOptionReq{}, Size: 24, Offs: map[string]int{
			"OptVal": 0, "ID": 8, "Level": 12, "OptName": 16, "OptLen": 20}, All: true},
	)
}

// TestSockaddr: addresses are laid out as struct sockaddr_in and
// sockaddr_in6 (family in host order, port in network order) and read
// back.
func TestSockaddr(t *testing.T) {
	for _, c := range []struct {
		ap   string
		size uint16
		head []byte // the first bytes of the encoding
	}{
		{"192.168.1.2:18515", 16, []byte{2, 0, 0x48, 0x53, 192, 168, 1, 2}},
		{"[::ffff:10.0.0.1]:1", 16, []byte{2, 0, 0, 1, 10, 0, 0, 1}},
		{"[fe80::1%7]:4791", 28, []byte{10, 0, 0x12, 0xb7, 0, 0, 0, 0, 0xfe, 0x80}},
	} {
		ap := netip.MustParseAddrPort(c.ap)
		b, size, err := encodeSockaddr(ap)
		if err != nil || size != c.size {
			t.Errorf("%s: size %d, %v; want %d", c.ap, size, err, c.size)
			continue
		}
		for i, v := range c.head {
			if b[i] != v {
				t.Errorf("%s: byte %d is %#x, want %#x (% x)", c.ap, i, b[i], v, b[:size])
				break
			}
		}
		back, err := decodeSockaddr(b[:], int(size))
		want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if err != nil || back != want {
			t.Errorf("%s: decoded %v, %v", c.ap, back, err)
		}
	}
	if _, _, err := encodeSockaddr(netip.MustParseAddrPort("[fe80::1%no-such-interface]:1")); err == nil {
		t.Error("an unknown zone encoded")
	}
	for _, bad := range [][]byte{nil, {2, 0}, {1, 0, 0, 0}, make([]byte, 20)} {
		if _, err := decodeSockaddr(bad, len(bad)); err == nil {
			t.Errorf("% x decoded", bad)
		}
	}
}

// FuzzSockaddr: any bytes the kernel could return decode without a panic,
// and what decodes encodes back to the same address (an IPv4-mapped one
// as IPv4).
func FuzzSockaddr(f *testing.F) {
	for _, s := range []string{"192.168.1.2:18515", "[fe80::1%3]:4791"} {
		b, n, _ := encodeSockaddr(netip.MustParseAddrPort(s))
		f.Add(b[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, err := decodeSockaddr(b, len(b))
		if err != nil {
			return
		}
		e, n, err := encodeSockaddr(ap)
		if err != nil {
			t.Fatalf("%v decoded from % x does not encode: %v", ap, b, err)
		}
		want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if again, err := decodeSockaddr(e[:], int(n)); err != nil || again != want {
			t.Fatalf("%v: encoded and decoded to %v, %v", ap, again, err)
		}
	})
}

func TestEventName(t *testing.T) {
	if EventName(EventEstablished) != "ESTABLISHED" || EventName(EventTimewaitExit) != "TIMEWAIT_EXIT" || EventName(99) != "EVENT_99" {
		t.Errorf("names %q %q %q", EventName(EventEstablished), EventName(EventTimewaitExit), EventName(99))
	}
}
