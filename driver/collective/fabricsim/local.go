package fabricsim

import (
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/switched"
)

// NewLocal builds one device per host of the fabric's topology (node ids
// firstNode, firstNode+1, ... in host order) in this process, each on its
// host's port, served by one engine: the many-device set-up the
// collective orders run on.
func NewLocal(cfg vdev.Config, f *switched.Fabric, firstNode uint16) (*vdev.Local, error) {
	nodes := make([]uint16, f.Topology().Hosts())
	host := map[uint16]int{}
	for i := range nodes {
		nodes[i] = firstNode + uint16(i)
		host[nodes[i]] = i
	}
	return vdev.NewLocalPorts(cfg, nodes, func(d *vdev.Device) (link.Port, error) {
		return f.Attach(d.MAC(), host[d.Node()])
	})
}
