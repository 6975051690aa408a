package gossip

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/drover-dev/drover/actors/placement"
)

// Profiles of failure detection.
const (
	// ProfileDefault is memberlist's DefaultLANConfig: a dead member is
	// dropped after about 5 s.
	ProfileDefault = "default"
	// ProfileFast probes every 200 ms with a 100 ms timeout, suspicion
	// multiplier 2, gossip every 50 ms and a push/pull every 2 s: a dead
	// member is dropped after about 1 s, for more network chatter.
	ProfileFast = "fast"
)

// DefaultBind is the gossip address used when Config.Bind is empty:
// loopback, so that a node never gossips on a public interface by accident.
const DefaultBind = "127.0.0.1:7946"

// SecretKeySize is the size of Config.SecretKey, when set.
const SecretKeySize = 32

// Config configures Join. The zero value of every field but Name means its
// default.
type Config struct {
	// Name is this node's name, unique in the cluster. Required.
	Name string
	// Bind is the host:port memberlist listens on (TCP and UDP); host is
	// an IP address. Port 0 picks a free port. Default DefaultBind.
	Bind string
	// Advertise is the host:port the others reach this node on, when it
	// differs from Bind (NAT, containers). Port 0 means Bind's port.
	Advertise string
	// Join lists host:port addresses of live members; any one answering
	// is enough. Empty: this node starts a new cluster.
	Join []string
	// Profile is ProfileDefault ("" too) or ProfileFast.
	Profile string
	// SecretKey encrypts and authenticates gossip (AES-256-GCM) when set;
	// it must be SecretKeySize bytes, and the same on every node. Required
	// when Bind or Advertise is not a loopback address
	// (ErrSecretKeyRequired): without it anyone who reaches the port can
	// join, gossip any metadata and be placed units.
	SecretKey []byte

	// DebugAddr, DebugTLS, Version and Capacity are gossiped to the others
	// as this node's metadata. DebugTLS says the debug endpoint serves
	// HTTPS. Capacity is the placement weight (<= 0 means 1; placement
	// counts more than cluster.max_capacity as cluster.max_capacity).
	DebugAddr string
	DebugTLS  bool
	Version   string
	Capacity  float64
	// MaxCapacity is this node's cluster.max_capacity, gossiped so that
	// every node clamps capacities with the smallest value in the view
	// (placement.EffectiveMaxCapacity). 0 gossips none; negative is invalid.
	MaxCapacity float64
	// Sources are the sources this node runs, gossiped from the first
	// metadata on (see Membership.SetSources for later changes). Nil: the
	// node does not say (the others take it to run every source); an
	// empty, non-nil slice: it runs none.
	Sources []placement.SourceTag

	// JoinTimeout is how long Join keeps trying when no member in Join
	// answers (they may be starting too); 0 means DefaultJoinTimeout, a
	// negative value tries once.
	JoinTimeout time.Duration

	// Logger receives this package's logs and memberlist's. Nil discards.
	Logger *slog.Logger
}

// DefaultJoinTimeout is how long Join retries by default.
const DefaultJoinTimeout = 30 * time.Second

// Validate reports every invalid field, each error naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name: required"))
	}
	bind := c.Bind
	if bind == "" {
		bind = DefaultBind
	}
	public := ""
	if ip, _, err := splitIPPort(bind); err != nil {
		errs = append(errs, fmt.Errorf("bind: %w", err))
	} else if !ip.IsLoopback() {
		public = "bind " + bind
	}
	if c.Advertise != "" {
		if ip, _, err := splitIPPort(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("advertise: %w", err))
		} else if !ip.IsLoopback() && public == "" {
			public = "advertise " + c.Advertise
		}
	}
	if public != "" && len(c.SecretKey) == 0 {
		errs = append(errs, fmt.Errorf("%w (%s)", ErrSecretKeyRequired, public))
	}
	for i, j := range c.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			errs = append(errs, fmt.Errorf("join[%d]: %w", i, err))
		}
	}
	switch c.Profile {
	case "", ProfileDefault, ProfileFast:
	default:
		errs = append(errs, fmt.Errorf("profile: %q is not %q or %q", c.Profile, ProfileDefault, ProfileFast))
	}
	if n := len(c.SecretKey); n != 0 && n != SecretKeySize {
		errs = append(errs, fmt.Errorf("secret_key: %d bytes, want %d", n, SecretKeySize))
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	if !finite(c.Capacity) {
		errs = append(errs, fmt.Errorf("capacity: %v is not a finite number", c.Capacity))
	}
	if !finite(c.MaxCapacity) || c.MaxCapacity < 0 {
		errs = append(errs, fmt.Errorf("max_capacity: %v is not a finite number of at least 0", c.MaxCapacity))
	}
	// Only finite numbers encode.
	if finite(c.Capacity) && finite(c.MaxCapacity) {
		if b := worstWithoutTags(c).encode(); len(b) > memberlist.MetaMaxSize {
			errs = append(errs, fmt.Errorf("name, debug_addr, version: %d bytes of gossiped metadata, memberlist allows %d", len(b), memberlist.MetaMaxSize))
		}
	}
	return errors.Join(errs...)
}

// splitIPPort parses "ip:port".
func splitIPPort(s string) (net.IP, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, 0, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, 0, fmt.Errorf("host %q is not an IP address", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, 0, fmt.Errorf("port %q: not a number in 0..65535", port)
	}
	return ip, int(p), nil
}

// deadNodeReclaimTime lets a node that died come back under its name at
// another address (a restart with a dynamic port, a rescheduled pod) as
// soon as the others have declared it dead. memberlist's default (0)
// refuses the name until the dead entry is reaped, 30 s later.
const deadNodeReclaimTime = time.Millisecond

// memberlistConfig builds memberlist's configuration from a validated c.
func (c Config) memberlistConfig(logger *slog.Logger) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	if c.Profile == ProfileFast {
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.SuspicionMult = 2
		mc.GossipInterval = 50 * time.Millisecond
		mc.PushPullInterval = 2 * time.Second
	}
	mc.Name = c.Name
	bind := c.Bind
	if bind == "" {
		bind = DefaultBind
	}
	ip, port, _ := splitIPPort(bind)
	mc.BindAddr, mc.BindPort = ip.String(), port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if c.Advertise != "" {
		aip, aport, _ := splitIPPort(c.Advertise)
		mc.AdvertiseAddr = aip.String()
		if aport != 0 {
			mc.AdvertisePort = aport
		}
	}
	if len(c.SecretKey) > 0 {
		mc.SecretKey = append([]byte(nil), c.SecretKey...)
	}
	mc.DeadNodeReclaimTime = deadNodeReclaimTime
	mc.LogOutput = nil
	mc.Logger = log.New(logWriter{log: logger.With("component", "memberlist")}, "", 0)
	return mc
}
