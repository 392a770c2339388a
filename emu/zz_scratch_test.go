//go:build linux

package emu

import (
	"runtime"
	"sync/atomic"
	"testing"
)

func BenchmarkZZWrite(b *testing.B) {
	for _, sig := range []bool{true, false} {
		name := "sig"
		if !sig {
			name = "unsig"
		}
		b.Run(name, func(b *testing.B) {
			ctx := openBench(b)
			defer ctx.Close()
			x, y := newEndpoint(b, ctx, 1<<16), newEndpoint(b, ctx, 1<<16)
			defer x.close()
			defer y.close()
			_ = x.connect(y.info())
			_ = y.connect(x.info())
			var bare uint64
			mk := func(e *endpoint, p peerInfo, init bool) func(pingKind, int) {
				w := newWritePinger(b, e, p)
				if !sig {
					w.wr[0].Flags = 0
				}
				return func(k pingKind, n int) {
					if k == pingBare {
						barePingPong(&bare, n, init)
						return
					}
					if sig {
						w.run(n, init)
						return
					}
					for range n {
						c := w.sent + 1
						if !init {
							for uint8(loadW(w.in)>>8) != c {
							}
						}
						w.out[1] = c
						if _, err := w.e.qp.PostSend(w.wr); err != nil {
							b.Fatal(err)
						}
						w.sent = c
						if init {
							for uint8(loadW(w.in)>>8) != c {
							}
						}
					}
				}
			}
			peer := newThreadPeer(mk(y, x.info(), false))
			defer peer.stop()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			slicedPingPong(b, pingWrite, peer, &bare, mk(x, y.info(), true))
		})
	}
}

func loadW(p *uint32) uint32 { return atomic.LoadUint32(p) }
