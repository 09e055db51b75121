package datasheet

import "github.com/dimmnet/dimmnet/uapi"

// The sections a driver writer in another language needs beyond the
// tables: how to reach the device over each transport, how to start on a
// device someone used before, and the order of the loads and stores that
// publish commands, consume statuses and sleep without losing a wake-up.
// docs/examples/pydriver.py is a driver written from them alone.

type printer = func(string, ...any)

func steps(p printer) {
	p("## Writing a driver: the steps\n\n")
	p("1. Attach: map the region and find the doorbell and the interrupt of your transport (see Transports).\n")
	p("2. Check the register page: MAGIC = 0x%X, ABI_VERSION = %d, STATE = %d (running); read the geometry registers and check every part lies inside REGION_SIZE (see Starting up).\n", uapi.Magic, uapi.ABIVersion, uapi.StateRunning)
	p("3. Take over the command queue and the status ring where the device and a previous driver left them (see Starting up).\n")
	p("4. As needed: expose a window to remote PUSH and PULL (WIN_BASE, WIN_SIZE), set up IPUSH rings and route senders to them (IPUSH rings, AMT Address Table access).\n")
	p("5. Post commands (Publishing a command); wait for statuses (Waiting for statuses) and consume them (Consuming statuses), following Memory ordering.\n")
	p("6. Watch STATE and ALIVE while you wait (Liveness).\n\n")
	p("The same numbers in C: `uapi/dimmnet.h`, generated with this datasheet from the same tables, is the C form of this ABI (registers, descriptor, status, AMT entry and violation log entry as structs with `_Static_assert` offset and size checks, opcodes, flags, status types, error codes, counters, feature bits and violation kinds); `uapi/dimmnet_uapi.py` is the Python form.\n\n")
	p("`docs/examples/pydriver.py` is such a driver in Python 3, written from this datasheet alone: it attaches to a daemon's nodes over the ivshmem socket, posts a PUSH and waits for its DONE by the rules below.\n\n")
}

func completions(p printer) {
	p("\n### Completion statuses\n\n")
	p("The completions of a driver's own commands arrive on its device's one status ring, the receive status ring, among the statuses of what other nodes send it (see Consuming statuses). Their fields:\n\n")
	p("| field | DONE (%d) | ERROR (%d) | PULL_DONE (%d) |\n|---|---|---|---|\n", uapi.StDone, uapi.StError, uapi.StPULLDone)
	p("| OPCODE | the command's | the command's | the command's: PULL (%d), FADD8 (%d) or CAS8 (%d) |\n", uapi.OpPULL, uapi.OpFADD8, uapi.OpCAS8)
	p("| SRC_NODE | this device's node | this device's node | DST_NODE, the node read from |\n")
	p("| SRC_PROC | the command's SRC_PROC | the command's SRC_PROC | the command's SRC_PROC |\n")
	p("| MSG_ID | 0 | 0 | the read's message id |\n")
	p("| LENGTH | the command's LENGTH | 0 | the command's LENGTH |\n")
	p("| ADDR | 0 | 0 | the command's LOCAL_ADDR |\n")
	p("| ERR | 0 | the error code | 0 |\n")
	p("| END | the command's index (a PUSH's or IPUSH's DONE too: not a ring or memory position) | the command's index | the command's index |\n")
	p("| IMM | 0 | 0 | FADD8, CAS8: the word's old value (also at ADDR); PULL: 0 |\n")
	p("| COOKIE | the command's | the command's | the command's |\n\n")
	p("The command's index is the free-running index its descriptor was published with (the slot's SEQ - 1), all 64 bits, in END: there is no separate command-index field. The other fields are 0. A command refused by the receiving node (REMOTE_ADDR, NO_AMT_ENTRY, BAD_AMT, TOO_BIG, BAD_TAG) fails with an ERROR status on the sender's ring like any other. The ERROR register repeats the last error with only the low 32 bits of the index.\n")
}

func transports(p printer) {
	p("\n## Transports\n\n")
	p("How a driver maps the region, rings the doorbell (wakes the device's engine) and is interrupted (woken by the device):\n\n")
	p("| transport | region | doorbell | interrupt |\n|---|---|---|---|\n")
	p("| host process attached to `dimmnet serve` (QEMU's ivshmem server protocol on `DIR/node<K>.sock`) | the fd sent with -1: map all of it (size from fstat), shared, read-write | write the 8-byte count 1 to peer 0's vector-0 eventfd (the first fd sent with id 0); any of peer 0's VECTORS eventfds wakes the device | your own vector-0 eventfd (the first fd sent with your own id) becomes readable; read its 8 bytes to reset it |\n")
	p("| guest under QEMU (`ivshmem-doorbell` PCI device 1af4:1110 on that socket) | BAR2, all of it | a 32-bit store of peer id << 16 \\| vector = 0 << 16 \\| 0 (peer 0, vector 0) into BAR0's Doorbell register (offset 12); BAR0's IVPosition (offset 8) is the guest's own peer id | none reaches guest user space (no kernel driver enables MSI-X): poll, sleeping briefly |\n")
	p("| Go program embedding the device (package vdev) | `Device.Region()` | call `Device.Doorbell()` (or signal the eventfd `Device.DoorbellFD()`) | a channel given to `Device.WatchInterrupt`, or the eventfd `Device.InterruptFD()` |\n\n")
	p("The DOORBELL register (0x%03X) is only a count for inspectors: storing to it wakes nothing and the device never reads it. The doorbell is the transport's; the device counts those it hears in the DOORBELLS counter.\n\n", uapi.RegDoorbell)
	p("The ivshmem server protocol, as a host process sees it: the server sends messages of 8 bytes (a little-endian int64) on a stream UNIX socket, each with at most one fd (SCM_RIGHTS); the client sends nothing (anything it sends, or closing the socket, is leaving). In order: the protocol version, 0 (anything else is a refusal); your peer id (1 or more); -1 with the region's fd; every other peer's id once per vector with one of its eventfds, the device (peer 0) first; last, your own id once per vector with your eventfds, vector 0 first. How many: VECTORS of each (the VECTORS register, which you can read as soon as the region's fd has come and is mapped: the region is usable from then on). So the set-up is over when your own id has come VECTORS times; a client that stops at its first own vector (all a host driver needs is peer 0's vector 0 and its own) reads the rest later as messages of a new peer and closes their fds. Afterwards: an id with an fd is a new peer's vector, an id without an fd is a peer leaving, and peer 0 leaving means the device is gone (the daemon shut down). Close the fds you do not use.\n\n")
	p("The device signals the interrupt of every driver attached to it (each ivshmem client's vector 0) when it has published statuses while DRV_WAIT is non-zero (see Waiting for statuses). Several processes may attach to one device, but a device has one command queue and one status ring: one driver at a time uses them.\n")
}

func startUp(p printer) {
	p("\n## Starting up\n\n")
	p("- MAGIC is stored last when the device is made: a driver that reads it reads a whole register page. Refuse anything but ABI_VERSION %d, and any geometry whose parts (CMDQ_OFF + CMDQ_ENTRIES*%d, STATQ_OFF + STATQ_ENTRIES*%d, AMT_OFF + AMT_ENTRIES*%d, LINKMEM_OFF + LINKMEM_SIZE, ...) do not lie inside REGION_SIZE, which must equal the bytes mapped; CMDQ_ENTRIES and STATQ_ENTRIES are powers of two.\n", uapi.ABIVersion, uapi.DescSize, uapi.StatusSize, uapi.AMTSize)
	p("- Your command index. The device takes slot CMDQ_HEAD mod CMDQ_ENTRIES when its SEQ word equals CMDQ_HEAD + 1. Your first index is the first i at or above CMDQ_HEAD whose slot is not published (its SEQ is not i + 1): CMDQ_HEAD itself on a fresh device or after a driver whose commands were all taken; further on when a previous driver published commands the device has not taken yet (they will still run). Never post an index below CMDQ_HEAD (the device has passed it and waits for ever at its head) and never skip one (the device waits at the skipped index for ever; a checked device names it SKIPPED_INDEX); on a fresh device the index starts at 0. The index is free-running: slot = index mod CMDQ_ENTRIES, and statuses report it in END.\n")
	p("- Your status head. STATQ_HEAD is what the previous driver published, which may lag what it read (drivers publish it lazily). Either discard its leftovers: store STATQ_HEAD = STATQ_TAIL and start there (the Go driver's DiscardStatuses); or start at STATQ_HEAD and expect statuses that are not yours: DONE, ERROR and PULL_DONE whose END is below your first command index, and receive statuses the previous driver may already have handled.\n")
	p("- Your AMT Address Table seq: continue from AMTAT_CTRL >> 8.\n")
	p("- AMT entries keep what the previous driver set up: set up again (IPUSH rings) the entries you use.\n")
}

func publishing(p printer) {
	p("\n## Publishing a command\n\n")
	p("1. Room: index - CMDQ_HEAD must stay below CMDQ_ENTRIES (reload CMDQ_HEAD when it looks full). The data a PUSH or IPUSH sends is already in link memory.\n")
	p("2. Write words 0 to 6 (bytes 0 to %d) of slot index mod CMDQ_ENTRIES, at CMDQ_OFF + slot*%d.\n", uapi.DescSeqOff-1, uapi.DescSize)
	p("3. Store SEQ (byte %d) = index + 1, last, one atomic 64-bit release store: the command is now published. The device polls the SEQ word of the slot at its head.\n", uapi.DescSeqOff)
	p("4. Store CMDQ_TAIL = index + 1 (for inspectors; the device never reads it).\n")
	p("5. Load DEV_SLEEP; if it is 1, ring the doorbell (see Transports).\n\n")
	p("No wake-up is lost because both sides store, then load, with a full barrier between (see Memory ordering): the driver stores SEQ, then loads DEV_SLEEP; the device, before it sleeps, stores DEV_SLEEP = 1, then loads the SEQ word of the slot at its head and AMTAT_CTRL, and sleeps only if neither shows work. So either the driver sees DEV_SLEEP = 1 and rings, or the device sees the command. A store to AMTAT_CTRL is followed by the same DEV_SLEEP check.\n\n")
	p("Freeing space (STATQ_HEAD, an AMT HEAD) needs no doorbell: a device waiting for space polls again within 50 µs even while it sleeps. Ringing when DEV_SLEEP = 1 only wakes it sooner (the Go driver does).\n")
}

func waiting(p printer) {
	p("\n## Waiting for statuses\n\n")
	p("Entries from your head up to STATQ_TAIL are published. To wait, poll STATQ_TAIL for a while; to sleep on the interrupt instead:\n\n")
	p("1. Publish your status head (STATQ_HEAD) and the heads of the IPUSH rings you have freed: the device may be waiting for room to write the very status you wait for.\n")
	p("2. Store DRV_WAIT = 1, then (full barrier) load STATQ_TAIL again. If it moved, store DRV_WAIT = 0 and consume.\n")
	p("3. Otherwise block on the interrupt with a timeout (the Go driver waits at most 10 ms at a time), then store DRV_WAIT = 0, check STATE and ALIVE (Liveness), and loop.\n\n")
	p("The device's half: after it has published statuses (stored STATQ_TAIL) it loads DRV_WAIT and, if non-zero, adds 1 to INTERRUPTS and signals the interrupt. So a sleeping driver either sees the new tail in step 2 or is signalled. The interrupt is a count, not a status: it may come for statuses you already consumed, so always re-check STATQ_TAIL. Guests get no interrupt and poll.\n")
}

func consuming(p printer) {
	p("\n## Consuming statuses\n\n")
	p("- Entry head is at STATQ_OFF + (head mod STATQ_ENTRIES)*%d. Load STATQ_TAIL (acquire); read the entries below it and the link memory they name; then store STATQ_HEAD = your new head (release). The device writes no entry more than STATQ_ENTRIES past STATQ_HEAD, so it may rewrite a slot as soon as STATQ_HEAD passes it. Publishing STATQ_HEAD lazily is allowed (the Go driver stores it every quarter ring, before it sleeps, and on a RING_FULL status); the device re-reads it when the ring looks full.\n", uapi.StatusSize)
	p("- There is one status ring per device. It carries, in the order the device published them, the completions of this driver's own commands (DONE, ERROR, PULL_DONE) and what arrives from other nodes (PUSH, IPUSH_PKT, IPUSH_MSG, RING_FULL, PAGE_REQ). A driver waiting for a completion must keep or handle the receive statuses it reads on the way, and the other way round.\n")
}

func ordering(p printer) {
	p("\n## Memory ordering\n\n")
	p("The device and the driver share memory with no lock. A driver in C, Python or any other language follows these rules (C11 terms; the Go code uses sync/atomic, whose operations are sequentially consistent):\n\n")
	p("1. Every access to a register, a descriptor's SEQ word, a status entry word or an AMT entry word is one aligned 64-bit atomic load or store (C: `atomic_load_explicit` and `atomic_store_explicit` on `_Atomic uint64_t`, or the `__atomic` builtins), never two 32-bit halves or a byte copy. AMT Address Table mirror and frame tag table words are 32-bit atomic accesses.\n")
	p("2. Stores that hand something to the device are release stores, after the plain writes they publish: SEQ (after descriptor words 0 to 6 and the data in link memory), STATQ_HEAD and AMT HEAD (after you are done reading the entries and ring data they free), the AMT SIZE|FLAGS word (after BASE, HEAD, TAIL), AMTAT_CTRL (after AMTAT_SEL and AMTAT_DATA).\n")
	p("3. Loads that observe the device are acquire loads, before the reads they cover: STATQ_TAIL (then the entries and their data), an AMT TAIL, CMDQ_HEAD (then reusing slots), AMTAT_DONE (then AMTAT_DATA). Descriptor words 0 to 6 are plain stores; status entry words may be read with plain loads after the acquire of STATQ_TAIL.\n")
	p("4. Two store-then-load pairs need a full barrier (sequentially consistent store and load, or `atomic_thread_fence(memory_order_seq_cst)` between them): storing SEQ (or AMTAT_CTRL) then loading DEV_SLEEP, and storing DRV_WAIT = 1 then loading STATQ_TAIL. Release and acquire are not enough there: on x86-64 a store waits in the store buffer while a later load goes ahead, and a wake-up is lost; x86-64 needs MFENCE or a locked instruction (Go's atomic store is an XCHG). The device fences its side of both pairs.\n")
	p("5. Bound every sleep anyway: a driver that blocks on its interrupt with a timeout loses at most the timeout if it gets rule 4 wrong, and the device's engine, while it sleeps, wakes at least every 100 ms (for ALIVE), so a lost doorbell costs at most that.\n")
	p("6. x86-64: an aligned 8-byte MOV is atomic, and every store is a release and every load an acquire, so rules 1 to 3 hold for single 8-byte accesses; only rule 4 needs a fence. Other architectures (arm64) need the C11 orders as written.\n")
	p("7. Python 3 (CPython, x86-64): make every word access one 8-byte copy by indexing a `memoryview` of the `mmap` cast to 'Q' (`mv.cast('Q')[off // 8]`); `struct.pack_into` with '<' may write byte by byte. Python has no fence: `docs/examples/pydriver.py` acquires and releases a `threading.Lock` (locked instructions in CPython) for rule 4 and bounds its waits as rule 5 says.\n")
}

func liveness(p printer) {
	p("\n## Liveness\n\n")
	p("- STATE is %d (running) while the device works. It is %d (stopped) for good once the device is closed or its daemon shuts down; a driver fails its waits then. An attached host process also learns it from the socket (peer 0 leaving, or the socket closing).\n", uapi.StateRunning, uapi.StateStopped)
	p("- ALIVE holds the CLOCK_MONOTONIC time in ns of the device's host, which the device's engine stores every 10 ms while it works and at least every 100 ms while it sleeps (an idle daemon of 64 devices then costs under 1%% of a core); a device embedded in the driver's own process is also kept alive by the driver's thread while it runs the device. A guest's clock is not that clock, so judge ALIVE by whether it changes: the Go driver calls the device stale when ALIVE has not changed for 2 s of its own clock (it looks after each sleep on the interrupt) and fails its wait. Do not depend on the period: call a device stale only after seconds without change.\n")
}
