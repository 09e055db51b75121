// Package regfs shows dimmnet devices as files, the way /dev and /sys show
// hardware: one directory per device with a file per register, counter and
// trace stamp, the command queue and receive status ring decoded slot by
// slot, the AMT and AMT Address Table, and link memory as a raw file that
// dd, xxd and hexdump read at any offset.
//
// A device's whole driver-visible state is its shared region, so regfs
// needs nothing but the mapped bytes: it works on a device in this process,
// on a region a host process attached to over ivshmem, or on a region
// file (serve --shm-dir), and it never talks to the device model. Every file is rendered
// afresh on every read (direct I/O, no kernel caching), so `cat` always
// shows the live value, and shared words are loaded atomically as any
// driver must load them.
//
// Writes are off unless Options.Writable is set: then read-write registers
// accept `echo VALUE > file` and link memory accepts writes at any offset.
// Read-only registers refuse a write open with EACCES whatever the options,
// because the device alone owns them.
//
// WriteStat prints the same decoding once, as text, for `dimmnet stat`.
package regfs
