package unix

import (
	"os"
	"strconv"
	"testing"
)

// TestCPUNode: on a kernel with NUMA support the node of the calling CPU
// is one of the nodes sysfs lists.
func TestCPUNode(t *testing.T) {
	n, ok := CPUNode()
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		if ok {
			t.Fatalf("node %d on a kernel whose sysfs lists no node", n)
		}
		t.Skip("no NUMA nodes in sysfs")
	}
	if !ok {
		t.Fatal("no node, though sysfs lists nodes")
	}
	if _, err := os.Stat("/sys/devices/system/node/node" + strconv.Itoa(n)); err != nil {
		t.Fatalf("node %d: %v", n, err)
	}
}
