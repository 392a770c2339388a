package main

import (
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// gids keeps the backend's GID table in step with the guest's: each GID the
// guest adds becomes an address of the backend's network interface, from
// which the kernel derives the backend device's GIDs.
type gids struct {
	cfg config
	mu  sync.Mutex
	// added: the addresses madmux added (as ip's prefix argument), by GID.
	added map[netip.Addr]string
	// wait is how long a new GID may take to appear in the backend's table.
	wait time.Duration
}

func newGIDs(cfg config) *gids {
	return &gids{cfg: cfg, added: make(map[netip.Addr]string), wait: 5 * time.Second}
}

func (g *gids) handle(req request) errCode {
	switch req.op {
	case opReg:
		if err := g.add(req.gid); err != nil {
			log.Printf("REG %s: %v", req.gid, err)
			return errInval
		}
		log.Printf("REG %s", req.gid)
	case opUnreg:
		if err := g.remove(req.gid); err != nil {
			log.Printf("UNREG %s: %v", req.gid, err)
			return errNotFound
		}
		log.Printf("UNREG %s", req.gid)
	case opMAD:
		log.Printf("MAD of %d bytes from %s dropped: RDMA-CM is not carried", req.umadLen, req.gid)
	default:
		log.Printf("%v: unknown request", req.op)
		return errInval
	}
	return errOK
}

// ipArgs returns the ip command's arguments that add (or with "del",
// remove) the address of a GID on dev: an IPv4-mapped GID is an IPv4
// address, any other an IPv6 one (without duplicate address detection: the
// guest owns the same address on the wire).
func ipArgs(verb string, gid netip.Addr, dev string) []string {
	if gid.Is4In6() {
		return []string{"addr", verb, gid.Unmap().String() + "/32", "dev", dev}
	}
	args := []string{"-6", "addr", verb, gid.String() + "/64", "dev", dev}
	if verb == "add" {
		args = append(args, "nodad")
	}
	return args
}

func (g *gids) add(gid netip.Addr) error {
	if g.cfg.netdev == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.added[gid]; ok {
		return nil
	}
	if !g.present(gid) {
		args := ipArgs("add", gid, g.cfg.netdev)
		if out, err := exec.Command(g.cfg.ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", g.cfg.ip, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		g.added[gid] = strings.Join(args[:len(args)-1], " ")
	}
	deadline := time.Now().Add(g.wait)
	for !g.present(gid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not in %s's GID table after %v", g.cfg.ibdev, g.wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (g *gids) remove(gid netip.Addr) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.added[gid]; !ok {
		return nil
	}
	delete(g.added, gid)
	args := ipArgs("del", gid, g.cfg.netdev)
	if out, err := exec.Command(g.cfg.ip, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", g.cfg.ip, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeAll removes every address madmux added.
func (g *gids) removeAll() {
	g.mu.Lock()
	all := make([]netip.Addr, 0, len(g.added))
	for gid := range g.added {
		all = append(all, gid)
	}
	g.mu.Unlock()
	for _, gid := range all {
		if err := g.remove(gid); err != nil {
			log.Print(err)
		}
	}
}

// present reports whether the backend device's GID table holds gid, on any
// port (sysfs: /sys/class/infiniband/DEV/ports/N/gids/I).
func (g *gids) present(gid netip.Addr) bool {
	files, _ := filepath.Glob(filepath.Join("/sys/class/infiniband", g.cfg.ibdev, "ports", "*", "gids", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if a, err := netip.ParseAddr(s); err == nil && a == gid {
			return true
		}
	}
	return false
}
