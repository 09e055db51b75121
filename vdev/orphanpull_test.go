package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A responder that gives up its session to the requester drops the PULL
// responses it owed; with nothing more to send it never starts the new
// session that would tell the requester. The requester's own guard on a
// PULL whose request was acknowledged fails it UNREACHABLE after the
// transport's give-up rules, once (it waited for ever; fuzz corpus
// aa07fc9c2694167b).
func TestOrphanedPullFailsUnreachable(t *testing.T) {
	ops := []pfScript{pfScript{}.pull(0, 6, 0, 2), pfScript{}.step(0, 1), pfScript{}.step(1, 1), pfScript{}.step(0, 1)}
	for i := range 6 {
		ops = append(ops, pfScript{}.advance(byte(3+i)), pfScript{}.step(1, 6), pfScript{}.step(0, 2))
	}
	r, n := playDropping(t, ops, func(dir int, h *wire.Header) bool { return dir == 1 && h.Type == wire.TypePullResp })
	if n == 0 {
		t.Fatal("no PULL response was sent")
	}
	c := r.cmds[0][0]
	if c.stats != 1 || c.err != uapi.EUnreachable {
		t.Fatalf("the PULL ended %v after %d statuses, want UNREACHABLE once", c.err, c.stats)
	}
	if got := r.dev[1].r.Counter(uapi.CtrTimeouts); got < uint64(r.dev[1].cfg.MaxTimeouts) {
		t.Fatalf("node 2 counted %d timeouts: it never gave up its session", got)
	}
	if p := r.dev[0].peers[2]; p.pullDeadline != 0 || len(p.pulls) != 0 {
		t.Fatalf("node 1 still guards %d PULLs (deadline %d)", len(p.pulls), p.pullDeadline)
	}
}
