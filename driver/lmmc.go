package driver

import (
	"fmt"

	"github.com/dimmnet/dimmnet/uapi"
)

// The device support LMMC (package lmmc) stands on: tagged remote writes,
// the frame-to-port tag table, and paging requests that travel in order
// with the data and hold the requester's later data until the receiver's
// driver says paging is done. Real NICs have memory keys for the same
// reason: the device places data with no software on the receiving side.

// PageSize is the size of a link page frame; frame f starts at link address f*PageSize.
func (d *Driver) PageSize() uint64 { return d.g.PageSize }

// Frames is the number of link page frames of link memory.
func (d *Driver) Frames() uint32 { return uint32(d.g.Frames()) }

// PushTagged posts a PUSH whose every byte must land in link page frames
// the receiver has tagged with port; the receiving device refuses it
// otherwise (the sender gets an ERROR status with uapi.EBadTag, the
// receiver counts MISPLACED).
func (d *Driver) PushTagged(dst uint16, local, remote uint64, n uint32, port uint16, flags uint8, cookie uint64) (uint64, error) {
	if port == 0 {
		return 0, fmt.Errorf("tagged push to node %d: port 0 is no port", dst)
	}
	return d.Post(&uapi.Desc{Opcode: uapi.OpPUSH, Flags: flags | uapi.FlagTagged, DstNode: dst, SrcProc: d.GPID(), Length: n,
		LocalAddr: local, RemoteAddr: remote, Cookie: cookie, Operand: uint64(port)})
}

// SetFrameTag sets the port local frame belongs to in the device's frame
// tag table (0: untagged, TAGGED writes into it are refused).
func (d *Driver) SetFrameTag(frame uint32, port uint16) error {
	if uint64(frame) >= d.g.Frames() {
		return fmt.Errorf("set tag of frame %d: only %d frames", frame, d.g.Frames())
	}
	d.r.Store32At(d.g.FrameTagOff+4*uint64(frame), uint32(port))
	return nil
}

// FrameTag reads a frame's port tag.
func (d *Driver) FrameTag(frame uint32) uint16 {
	if uint64(frame) >= d.g.Frames() {
		return 0
	}
	return uint16(d.r.Load32At(d.g.FrameTagOff + 4*uint64(frame)))
}

// PageRequest sends node dst a remote paging request: page port into your
// receive frame. It travels in order with the data; dst's driver gets a
// uapi.StPageReq status {SrcNode, Imm: port, Addr: frame}, and dst's device
// places nothing more from this node until that driver calls PageDone.
func (d *Driver) PageRequest(dst uint16, port uint16, frame uint32, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpPAGE, DstNode: dst, SrcProc: d.GPID(), Imm: uint64(port), RemoteAddr: uint64(frame), Cookie: cookie})
}

// PageDone tells the device that the paging peer asked for is done: it
// places that peer's data again.
func (d *Driver) PageDone(peer uint16) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpPAGEDONE, DstNode: peer})
}
