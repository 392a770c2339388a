//go:build linux

package rdmacm

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/pvperf/pvperf/internal/ibabi"
	"github.com/pvperf/pvperf/internal/wire"
)

// The structs of every connection's commands and events are copied from
// memory (package wire), not encoded field by field, on little-endian
// hosts: setting up many connections at once must not wait on the
// encoding.
func TestNativeLayouts(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the layouts are pinned for amd64 and arm64; elsewhere a struct may be encoded field by field")
	}
	if !wire.Native(reflect.TypeOf(cmdHdr{})) {
		t.Skip("big-endian host")
	}
	for _, v := range []any{createIDReq{}, createIDResp{}, destroyIDReq{}, destroyIDResp{}, bindReq{}, resolveAddrReq{},
		resolveRouteReq{}, queryReq{}, queryAddrResp{}, connParam{}, udParam{}, connectReq{}, listenReq{}, acceptReq{},
		rejectReq{}, disconnectReq{}, initQPAttrReq{}, getEventReq{}, eventResp{}, setOptionReq{}, ibabi.QPAttr{}} {
		if !wire.Native(reflect.TypeOf(v)) {
			t.Errorf("%T is encoded field by field (its Go layout is not its encoding)", v)
		}
	}
}
