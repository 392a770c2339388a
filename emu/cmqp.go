//go:build linux

package emu

import (
	"github.com/pvperf/pvperf/internal/unix"
	"github.com/pvperf/pvperf/verbs"
)

// InitQPAttr returns the attributes that move the id's QP to state, with
// the masks the kernel's rdma_cm returns (cma.c, ib_cm's
// cm_init_qp_*_attr):
//
//   - RC INIT: state, P_Key index 0, port 1 and the access flags: REMOTE_WRITE,
//     plus REMOTE_READ and REMOTE_ATOMIC when the connection has responder
//     resources. Before Connect an active id knows no connection yet and
//     gives no access flags (0), as the kernel does: like librdmacm, apply
//     INIT again after Connect.
//   - RC RTR (once the peer is known): path MTU, destination QP number, RQ
//     PSN, max_dest_rd_atomic (this side's responder resources),
//     min_rnr_timer 0 and the address vector.
//   - RC RTS: SQ PSN, the ACK timeout, retry count (the requester's), RNR
//     retry count (the REP's for the active side, the REQ's for the
//     passive side) and max_rd_atomic (this side's initiator depth).
//
// Each side sends the starting PSN it chose (random, 24 bits) in its REQ
// or REP, and, as with the kernel (ib_cm takes the SQ PSN from the
// peer's message, rdma_cm sets the RQ PSN to the id's own), receives at
// its own PSN and sends at the peer's.
//   - UD INIT: state, P_Key index 0, port 1 and Q_Key CMUDPQKey; RTR the
//     state alone; RTS the state and the SQ PSN.
func (id *cmID) InitQPAttr(state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	op := "init qp attributes for " + state.String()
	id.mu.Lock()
	defer id.mu.Unlock()
	if err := id.usable(op); err != nil {
		return verbs.QPAttr{}, 0, err
	}
	if id.dev == nil {
		return verbs.QPAttr{}, 0, errf(op, unix.ENODEV, "id is not bound to a device")
	}
	if id.ps == verbs.PortSpaceUDP {
		return id.udAttr(op, state)
	}
	switch state {
	case verbs.StateInit:
		return id.rcInit(), verbs.AttrState | verbs.AttrAccessFlags | verbs.AttrPKeyIndex | verbs.AttrPort, nil
	case verbs.StateRTR, verbs.StateRTS:
		if !id.peerKnown {
			return verbs.QPAttr{}, 0, errf(op, unix.EINVAL, "no connection yet (id is %v)", id.st)
		}
		if state == verbs.StateRTR {
			return id.rcRTR(), verbs.AttrState | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrDestQPN |
				verbs.AttrRQPSN | verbs.AttrMaxDestRdAtomic | verbs.AttrMinRNRTimer, nil
		}
		return id.rcRTS(), verbs.AttrState | verbs.AttrSQPSN | verbs.AttrTimeout | verbs.AttrRetryCnt |
			verbs.AttrRNRRetry | verbs.AttrMaxQPRdAtomic, nil
	}
	return verbs.QPAttr{}, 0, errf(op, unix.EINVAL, "no attributes for state %v", state)
}

func (id *cmID) rcInit() verbs.QPAttr {
	a := verbs.QPAttr{State: verbs.StateInit, Port: 1}
	if id.peerKnown {
		a.Access = verbs.AccessRemoteWrite
		if id.respRes > 0 {
			a.Access |= verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
		}
	}
	return a
}

func (id *cmID) rcRTR() verbs.QPAttr {
	return verbs.QPAttr{
		State: verbs.StateRTR, PathMTU: id.peer.mtu, DestQPN: id.peer.qpn, RQPSN: id.psn,
		MaxDestRdAtomic: id.respRes, AH: id.ah(id.peer.gid),
	}
}

func (id *cmID) rcRTS() verbs.QPAttr {
	a := verbs.QPAttr{
		State: verbs.StateRTS, SQPSN: id.peer.psn, Timeout: CMDefaultAckTimeout,
		RetryCnt: id.retry, RNRRetry: id.rnrRetry, MaxRdAtomic: id.initDepth,
	}
	if id.ackSet {
		a.Timeout = id.ackTimeout
	}
	return a
}

func (id *cmID) udAttr(op string, state verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask, error) {
	switch state {
	case verbs.StateInit:
		return verbs.QPAttr{State: state, Port: 1, QKey: CMUDPQKey},
			verbs.AttrState | verbs.AttrPKeyIndex | verbs.AttrPort | verbs.AttrQKey, nil
	case verbs.StateRTR:
		return verbs.QPAttr{State: state}, verbs.AttrState, nil
	case verbs.StateRTS:
		return verbs.QPAttr{State: state, SQPSN: id.psn}, verbs.AttrState | verbs.AttrSQPSN, nil
	}
	return verbs.QPAttr{}, 0, errf(op, unix.EINVAL, "no attributes for state %v", state)
}

// ah returns the address vector from the id's GID to dgid.
func (id *cmID) ah(dgid verbs.GID) verbs.AHAttr {
	return verbs.AHAttr{
		GRH:      verbs.GRH{DGID: dgid, SGIDIndex: uint8(id.gidIdx), HopLimit: CMHopLimit, TrafficClass: id.tos},
		IsGlobal: true,
		Port:     1,
	}
}
