package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/pvperf/pvperf/internal/interrupt"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.socket, "socket", "", "Unix socket `path` to listen on (the device's mad-chardev)")
	flag.StringVar(&cfg.netdev, "netdev", "", "network `interface` of the backend RDMA device: the guest's GID addresses go there")
	flag.StringVar(&cfg.ibdev, "ibdev", "", "backend RDMA `device` whose GID table must show the guest's GIDs")
	flag.StringVar(&cfg.ip, "ip", "ip", "iproute2's ip `command`")
	flag.Parse()
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix("madmux: ")
	if cfg.socket == "" || flag.NArg() != 0 || (cfg.netdev == "") != (cfg.ibdev == "") {
		fmt.Fprintln(os.Stderr, "usage: madmux -socket PATH [-netdev IFACE -ibdev DEV] [-ip PATH]")
		os.Exit(2)
	}
	ctx, stop := interrupt.Context("madmux", interrupt.Grace, os.Stderr)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

type config struct {
	socket, netdev, ibdev, ip string
}

// run listens on the socket and serves connections until ctx ends.
func run(ctx context.Context, cfg config) error {
	_ = os.Remove(cfg.socket)
	ln, err := net.Listen("unix", cfg.socket)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer os.Remove(cfg.socket)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	log.Printf("listening on %s", cfg.socket)
	gids := newGIDs(cfg)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				gids.removeAll()
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			defer c.Close()
			log.Printf("device connected")
			if err := serve(c, gids); err != nil {
				log.Printf("connection: %v", err)
			}
			log.Printf("device disconnected")
		}()
	}
}

// serve answers the requests of one connection until it closes.
func serve(c io.ReadWriter, h handler) error {
	b := make([]byte, msgSize)
	for {
		if _, err := io.ReadFull(c, b); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		req, err := decode(b)
		if err != nil {
			// Still answer: the device waits for a reply whatever it sent.
			log.Printf("bad message: %v", err)
			reply(b, errInval)
		} else {
			reply(b, h.handle(req))
		}
		if _, err := c.Write(b); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// handler answers one request with a status.
type handler interface {
	handle(request) errCode
}
