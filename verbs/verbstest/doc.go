// Package verbstest is the conformance suite of the verbs API. It is written
// against the interfaces of package verbs only, so that every backend (the
// emulated PVRDMA device, a kernel device) runs the same tests unchanged:
//
//	func TestMain(m *testing.M) { verbstest.Main(m, targets...) }
//
//	func TestConformance(t *testing.T) {
//		for _, tg := range targets {
//			t.Run(tg.Name, func(t *testing.T) { verbstest.Run(t, tg) })
//		}
//	}
//
// The suite checks what package verbs and the device attributes promise:
// object lifecycle and close order, memory registration, the QP state
// machine, every opcode of every QP type, shared receive queues, UD
// addressing and GRHs, the error statuses of work completions, two processes
// talking through the device, and that the data path does not allocate. A
// feature that the device attributes say is missing (a QP type, SRQs,
// atomics, inline data, the UD QP limit) is checked to fail with
// verbs.ErrNotSupported (ENOMEM for the UD QP limit); a feature they claim
// must work. Nothing is skipped silently.
//
// Some tests start a second process: the test binary itself, run again with
// the environment variable PeerEnv set. Main recognises it and runs the
// requested role instead of the tests, so a package that calls Run must call
// Main from its TestMain.
//
// # Ownership and concurrency
//
// Every object a test creates belongs to that test and is closed, children
// first, by t.Cleanup when the test ends; the same holds for the objects of
// a Pair made by NewPair. Run runs its subtests one after the other (the
// allocation checks count the allocations of the whole process), so Run
// must not be called in parallel with other tests of the same process that
// allocate. Targets, Pairs and ConnParams are plain values with no hidden
// state; a Pair's objects are as safe for concurrent use as the backend makes
// them.
package verbstest
