package controller

import (
	"context"
	"errors"
	"net"
)

// Host is the server a controller shares its remoting port with: a
// nameserver (enableControllerInNamesrv) or mqcontroller's own server.
type Host interface {
	Start() error
	Addr() string
	Shutdown(ctx context.Context) error
}

// Hosted runs a controller beside its host: the host starts listening
// first, so the controller knows the address it advertises, and stops
// last, after the controller left the group.
type Hosted struct {
	host Host
	ctl  *Controller
}

// NewHosted pairs ctl with host; ctl's processors must already be routed
// on host's remoting server (Register).
func NewHosted(host Host, ctl *Controller) *Hosted { return &Hosted{host: host, ctl: ctl} }

// Start starts the host, then the controller.
func (h *Hosted) Start() error {
	if err := h.host.Start(); err != nil {
		return err
	}
	return h.ctl.Start(h.ctl.advertiseFor(h.host.Addr()))
}

// Addr is the host's listening address.
func (h *Hosted) Addr() string { return h.host.Addr() }

// Controller is the hosted controller.
func (h *Hosted) Controller() *Controller { return h.ctl }

// Shutdown stops the controller, then the host. Safe to call twice.
func (h *Hosted) Shutdown(ctx context.Context) error {
	return errors.Join(h.ctl.Shutdown(ctx), h.host.Shutdown(ctx))
}

// advertiseFor is the remoting address brokers reach this controller at:
// the listening address, with the IP of this controller's Raft peer
// address when it listens on every interface.
func (c *Controller) advertiseFor(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if self := c.cfg.self(); self != nil {
			if h, _, err := net.SplitHostPort(self.Addr); err == nil {
				return net.JoinHostPort(h, port)
			}
		}
	}
	return listen
}
