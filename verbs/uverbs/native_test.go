//go:build linux

package uverbs

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/pvperf/pvperf/internal/wire"
)

// The command structs of the objects a connection creates are copied from
// memory (package wire), not encoded field by field, on little-endian
// hosts.
func TestNativeLayouts(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("the layouts are pinned for amd64 and arm64; elsewhere a struct may be encoded field by field")
	}
	if !wire.Native(reflect.TypeOf(respOnly{})) {
		t.Skip("big-endian host")
	}
	for _, v := range []any{respOnly{}, handleOnly{}, allocPDResp{}, regMRReq{}, regMRResp{}, createCQReq{}, createCQResp{},
		destroyReq{}, destroyCQResp{}, createQPReq{}, createQPResp{}, modifyQP{}, destroyQPResp{}, createAHReq{}} {
		if !wire.Native(reflect.TypeOf(v)) {
			t.Errorf("%T is encoded field by field (its Go layout is not its encoding)", v)
		}
	}
}
