//go:build linux

package uverbs

import (
	"encoding/binary"

	"github.com/pvperf/pvperf/internal/wire"
)

// The driver data of vmw_pvrdma (include/uapi/rdma/vmw_pvrdma-abi.h): what
// follows the core request (input) and the core response (output) of the
// commands that carry udata. Like the core structs of abi.go they are
// declared field by field so that encoding/binary lays them out exactly as
// the kernel does; pvrdma_test.go pins their sizes and offsets.

// pvrdma_alloc_ucontext_resp, after ib_uverbs_get_context_resp.
type pvrdmaContextResp struct {
	QPTabSize uint32
	Reserved  uint32
}

// pvrdma_alloc_pd_resp, after the 4-byte ib_uverbs_alloc_pd_resp.
type pvrdmaPDResp struct {
	PDN      uint32
	Reserved uint32
}

// pvrdma_create_cq, after ib_uverbs_create_cq.
type pvrdmaCreateCQ struct {
	BufAddr  uint64
	BufSize  uint32
	Reserved uint32
}

// pvrdma_create_cq_resp, after ib_uverbs_create_cq_resp.
type pvrdmaCreateCQResp struct {
	CQN      uint32
	Reserved uint32
}

// pvrdma_create_srq, after ib_uverbs_create_srq.
type pvrdmaCreateSRQ struct {
	BufAddr  uint64
	BufSize  uint32
	Reserved uint32
}

// pvrdma_create_srq_resp, after ib_uverbs_create_srq_resp.
type pvrdmaCreateSRQResp struct {
	SRQN     uint32
	Reserved uint32
}

// pvrdma_create_qp, after ib_uverbs_create_qp. QPAddr is an opaque cookie
// the kernel does not use.
type pvrdmaCreateQP struct {
	RBufAddr uint64
	SBufAddr uint64
	RBufSize uint32
	SBufSize uint32
	QPAddr   uint64
}

// pvrdma_create_qp_resp, after ib_uverbs_create_qp_resp. Kernels that
// know device QP handles (5.5 and later) refuse to create a QP from user
// space, with EOPNOTSUPP, when the response has no room for it on a host
// that distinguishes handles from QP numbers; older kernels write nothing.
type pvrdmaCreateQPResp struct {
	QPN      uint32
	QPHandle uint32
}

// Sizes of the driver data, for the command buffers.
const (
	pvrdmaContextRespSize = 8
	pvrdmaPDRespSize      = 8
	pvrdmaCQRespSize      = 8
	pvrdmaSRQRespSize     = 8
	pvrdmaQPRespSize      = 8
)

// pvrdmaPageDirMaxPages is PVRDMA_PAGE_DIR_MAX_PAGES: the most pages the
// kernel puts in the page directory of one CQ, QP (both buffers) or SRQ.
const pvrdmaPageDirMaxPages = 512 * 512

// pvrdmaEncode returns the little-endian encoding of driver input v.
func pvrdmaEncode(v any) []byte {
	b, err := binary.Append(nil, binary.LittleEndian, v)
	if err != nil {
		panic("uverbs: driver data of a fixed layout does not encode: " + err.Error())
	}
	return b
}

// pvrdmaDecode decodes driver output b into v.
func pvrdmaDecode(b []byte, v any) {
	if _, err := wire.Decode(b, v); err != nil {
		panic("uverbs: driver data of a fixed layout does not decode: " + err.Error())
	}
}
