package link_test

import (
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
)

// The abilities the wrapping media forward from the port they wrap (each
// answers for its inner port): checked here, where all of them can be
// named without an import cycle.
var (
	_ link.Peeker             = (*auth.Port)(nil)
	_ link.LosslessMedium     = (*auth.Port)(nil)
	_ link.CrossProcessMedium = (*auth.Port)(nil)
	_ link.ChecksumNeeder     = (*auth.Port)(nil)
	_ link.DropCounter        = (*auth.Port)(nil)
	_ link.TxErrorCounter     = (*auth.Port)(nil)
	_ link.Backlogger         = (*auth.Port)(nil)
	_ link.Parker             = (*auth.Port)(nil)
	_ link.PeerWatcher        = (*auth.Port)(nil)
	_ link.PeerSet            = (*auth.Port)(nil)
	_ link.Screener           = (*auth.Port)(nil)

	_ link.Peeker         = (*capture.Port)(nil)
	_ link.LosslessMedium = (*capture.Port)(nil)
	_ link.ChecksumNeeder = (*capture.Port)(nil)
	_ link.DropCounter    = (*capture.Port)(nil)
	_ link.TxErrorCounter = (*capture.Port)(nil)
	_ link.PeerSet        = (*capture.Port)(nil)

	_ link.Peeker         = (*impair.Port)(nil)
	_ link.ChecksumNeeder = (*impair.Port)(nil)
	_ link.VectorSender   = (*impair.Port)(nil)
	_ link.Backlogger     = (*impair.Port)(nil)
	_ link.PeerSet        = (*impair.Port)(nil)
)
