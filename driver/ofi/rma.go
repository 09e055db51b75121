//go:build dimmnet_ofi

package main

import (
	"unsafe"

	"github.com/dimmnet/dimmnet/uapi"
)

// region is a registered memory region rma reaches (not yet offered).
type region struct{}

func (e *endpoint) rma(write bool, buf unsafe.Pointer, n int, peer, addr, key, data uint64, ctx unsafe.Pointer, flags uint64) int {
	return eNoSys
}

func (e *endpoint) atomic(op int, operand, compare uint64, result unsafe.Pointer, dst, addr, key uint64, ctx unsafe.Pointer) int {
	return eNoSys
}

func (e *endpoint) rmaDone(id uint64, s *uapi.Status) {}

func (e *endpoint) remoteWrite(m *inMsg) {}
