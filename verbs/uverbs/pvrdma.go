package uverbs

import "github.com/pvperf/pvperf/verbs"

// The vmw_pvrdma provider.

type pvrdmaProvider struct{}

func newPVRDMA() provider { return &pvrdmaProvider{} }

var errPVRDMA = verbs.Errorf(verbs.ErrNotSupported, "the vmw_pvrdma provider is not available in this build")

func (*pvrdmaProvider) contextOut() int                       { return 8 }
func (*pvrdmaProvider) setup(c *Context, drvOut []byte) error { return errPVRDMA }
func (*pvrdmaProvider) deviceAttr(a *verbs.DeviceAttr)        {}
func (*pvrdmaProvider) pdOut() int                            { return 8 }
func (*pvrdmaProvider) teardown(c *Context) error             { return nil }
func (*pvrdmaProvider) createCQ(c *Context, n, vector int, ch *compChannel) (verbs.CQ, error) {
	return nil, errPVRDMA
}
func (*pvrdmaProvider) createQP(pd *PD, init verbs.QPInit) (verbs.QP, error) { return nil, errPVRDMA }
func (*pvrdmaProvider) createSRQ(pd *PD, init verbs.SRQInit) (verbs.SRQ, error) {
	return nil, errPVRDMA
}
func (*pvrdmaProvider) createAH(pd *PD, attr verbs.AHAttr) (verbs.AH, error) { return nil, errPVRDMA }
