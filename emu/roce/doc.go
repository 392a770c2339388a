// Package roce encodes and decodes RoCE v2 packets: the payload of a UDP
// datagram to port 4791, made of the InfiniBand Base Transport Header
// (BTH), the extension headers its opcode carries, the payload, 0 to 3 pad
// bytes and the 4-byte invariant CRC (ICRC). It is the wire format the
// emulated device speaks to Linux's rdma_rxe and to RoCE NICs.
//
// The package owns the byte layout and nothing else: it does no I/O, keeps
// no QP state and gives no meaning to P_Keys, QP numbers or PSNs. Parse
// checks that a packet is well formed (length, opcode, transport version,
// pad), Encode writes headers, and ICRC, Seal and CheckICRC compute the
// trailer over the pseudo IP/UDP header that rdma_rxe and the IBA (Annex
// A17) define. A FlowSum computes the part of that header the packets of
// one flow share once, for a thread that sends or receives many.
//
// The hot path does not allocate: Parse aliases the payload in the buffer it
// parses, errors are package-level values (test them with errors.Is), and
// the ICRC is computed with hash/crc32 (or, where that is slower, as under
// an emulated CPU, with slicing-by-8 tables) plus a fixed-size pseudo header
// on the stack. The buffer given to ICRC, Seal or CheckICRC is handed to
// hash/crc32, which lets it escape; use heap or pooled packet buffers.
//
// # IPv4 Identification
//
// The ICRC covers the IPv4 Identification field, and rdma_rxe fills it
// with the kernel's hashed IP ID generator (__ip_select_ident), so its
// packets carry non-zero IDs that a UDP socket does not report. Flow.ID
// holds the ID of the packets one sends (0 for an unconnected UDP socket
// with IP_PMTUDISC_DO, which sends DF and ID 0); CheckICRCAnyID checks a
// received IPv4 packet whose ID is unknown and recovers the ID, in one
// pass over the packet.
//
// # Concurrency
//
// Every function is safe for concurrent use: the package's tables are
// built at initialisation and only read afterwards. A Packet is a plain
// value with no synchronisation of its own.
package roce
