// Package lmmc is the LMMC (Link Memory based Communication) software
// interface on top of the dimmnet driver: link memory split into link page
// frames, virtual link pages mapped onto them through per-process page
// tables, ports (one-way channels named by positive integer ids that both
// ends agree on, shareable by several processes), the paper's send and
// receive link page frame tables and port tables, and remote paging.
//
// A Node is one network interface's LMMC instance. Init allocates the
// receive area (a pool of frames per connected node), builds the tables
// and starts the link-memory management goroutine. Processes (LMMC
// clients, each with its own page table) call Write and Read with virtual
// link addresses; the library translates in software. A write is a tagged
// remote write (driver.PushTagged) that the device places in the
// connected node's receive frame with no software on the receiving side;
// a read is a local read of link memory, or of the paged-out copy of a
// port that is not resident.
//
// A write to a non-resident virtual link page traps into the sender's
// paging path (the paper's sender steps (1)-(7)): the sender picks a
// victim frame with its replacement Policy (FIFO, LRU or Comm), sends a
// paging request through the device and fixes the page tables of every
// process sharing either port. Only the receiver moves data: its
// management goroutine, woken by the StPageReq status, pages the old port
// out to ordinary memory, pages the new one in, retags the frame and tells
// the device to resume placing that peer's data. docs/lmmc.md gives the
// argument that no write is lost or misplaced while paging runs.
package lmmc
