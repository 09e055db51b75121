package ranks

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// LocalMedium makes what np ranks of one job on this host need of their
// link beyond the shared-memory directory: for "udp" a peers file in dir
// naming a free loopback port per node, for "afpacket" a segment (a
// bridge with a veth per rank in a namespace named nsPrefix+pid, the
// caller's to Close), one host standing in for hosts on a switch; for
// other links nothing. The benchmarks that launch their own ranks use it.
func LocalMedium(linkName, dir, nsPrefix string, np int) (peers string, seg *netsetup.Segment, err error) {
	switch linkName {
	case "udp":
		peers = filepath.Join(dir, "peers")
		if err := link.WriteLoopbackPeers(peers, Nodes(np)...); err != nil {
			return "", nil, err
		}
	case "afpacket":
		if seg, err = netsetup.NewSegmentFor(nsPrefix, np, 9000); err != nil {
			return "", nil, fmt.Errorf("--link afpacket needs root and a network namespace: %w", err)
		}
	}
	return peers, seg, nil
}

// StartRanks starts cmds[r] as rank r of a job on this host: with seg,
// inside its namespace on its interface r ($DIMMNET_IFNAME, which Open
// reads); with seg nil, here. If one fails to start, the ranks started
// before it are killed and reaped, so a launcher never leaves a job half
// running.
func StartRanks(seg *netsetup.Segment, cmds []*exec.Cmd) error {
	for r, c := range cmds {
		start := c.Start
		if seg != nil {
			c.Env = append(c.Env, "DIMMNET_IFNAME="+seg.IfName(r))
			start = func() error { return seg.Start(c) }
		}
		if err := start(); err != nil {
			for _, c := range cmds[:r] {
				c.Process.Kill() // only the ranks started here
				c.Wait()
			}
			return fmt.Errorf("start rank %d: %w", r, err)
		}
	}
	return nil
}
