#!/usr/bin/env python3
"""A dimmnet driver in Python 3, written from docs/datasheet.md alone.

    python3 docs/examples/pydriver.py DIR/node0.sock DIR/node1.sock
    python3 docs/examples/pydriver.py DIR       (or DIMMNET_DIR=DIR, as dimmnet conform sets)

attaches to two nodes of a running `dimmnet serve --dir DIR` as an ivshmem
client (the region and eventfds arrive over the socket with SCM_RIGHTS),
takes over each device where a previous driver left it, PUSHes a pattern
from the first node to the second, waits for the DONE on the first node's
status ring and for the PUSH status on the second's, compares the bytes,
IPUSHes a message into a ring it sets up on the second node's AMT and
reads it back, then posts a misaligned PUSH and checks the ERROR status it
gets. It prints "ok" last and exits 0, or exits 1 naming what failed.

Every section name in the comments is a heading of docs/datasheet.md.
Memory ordering: written for CPython on x86-64, where a single aligned
8-byte access is atomic and ordered (rule 6); see rule 7.
"""

import mmap
import os
import platform
import select
import socket
import sys
import threading
import time

# Registers (offsets in the register page).
MAGIC, ABI_VERSION, NODE_ID, REGION_SIZE, STATE, ALIVE, MTU = 0x000, 0x008, 0x018, 0x020, 0x028, 0x030, 0x038
CMDQ_OFF, CMDQ_ENTRIES, STATQ_OFF, STATQ_ENTRIES = 0x040, 0x048, 0x050, 0x058
AMT_OFF, AMT_ENTRIES = 0x060, 0x068
LINKMEM_OFF, LINKMEM_SIZE, PROCS_PER_NODE = 0x098, 0x0A0, 0x0B0
CMDQ_TAIL, CMDQ_HEAD, STATQ_TAIL, STATQ_HEAD = 0x100, 0x140, 0x180, 0x1C0
DEV_SLEEP, DOORBELL, DRV_WAIT = 0x200, 0x208, 0x240
WIN_BASE, WIN_SIZE, ERROR = 0x308, 0x310, 0x380

MAGIC_VALUE, ABI = 0x3154454E4D4D4944, 7
STATE_RUNNING, STATE_STOPPED = 1, 2
DESC_SIZE, STATUS_SIZE, SEQ_OFF = 64, 64, 56
OP_PUSH, OP_IPUSH, FLAG_SIGNAL, FLAG_DIRECT_AMT = 3, 5, 1, 4
AMT_SIZE, AMT_BASE, AMT_CFG, AMT_HEAD, AMT_TAIL, AMT_VALID = 32, 0, 8, 16, 24, 1
ST_NAMES = {1: "PUSH", 2: "IPUSH_PKT", 3: "IPUSH_MSG", 4: "PULL_DONE", 5: "DONE", 6: "ERROR", 7: "RING_FULL", 8: "PAGE_REQ"}
ST_PUSH, ST_IPUSH_MSG, ST_PULL_DONE, ST_DONE, ST_ERROR = 1, 3, 4, 5, 6
E_BAD_ALIGN = 4

SLEEP_S = 0.010  # longest block on the interrupt (Memory ordering, rule 5)
STALE_S = 2.0  # ALIVE unchanged this long: the device is gone (Liveness)


class DeviceGone(Exception):
    pass


def recv_msg(sock):
    """One ivshmem server message: a little-endian int64 and at most one fd."""
    data, fds, _, _ = socket.recv_fds(sock, 8, 1)
    while 0 < len(data) < 8:  # a stream socket may split it; fds come with the first byte
        more, extra, _, _ = socket.recv_fds(sock, 8 - len(data), 1)
        if not more:
            break
        data += more
        fds += extra
    if len(data) != 8:
        raise DeviceGone("the server closed the socket")
    return int.from_bytes(data, "little", signed=True), (fds[0] if fds else -1)


class Device:
    """One device, attached over the ivshmem socket (Transports)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        version, _ = recv_msg(self.sock)
        if version != 0:
            raise RuntimeError(f"{path}: server refused us (version {version})")
        self.peer, _ = recv_msg(self.sock)
        shm = self.doorbell = self.irq = -1
        while shm < 0 or self.irq < 0:  # -1 + region, peer 0 first, our own vectors last
            peer, fd = recv_msg(self.sock)
            if peer == -1 and fd >= 0 and shm < 0:
                shm = fd
            elif peer == 0 and fd >= 0 and self.doorbell < 0:
                self.doorbell = fd  # peer 0's vector 0: the device's doorbell
            elif peer == self.peer and fd >= 0 and self.irq < 0:
                self.irq = fd  # our vector 0: the interrupt
            elif fd >= 0:
                os.close(fd)  # other peers' or further vectors
        if self.doorbell < 0:
            raise RuntimeError(f"{path}: no device eventfd (peer 0)")
        self.mm = mmap.mmap(shm, os.fstat(shm).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(shm)
        self.w = memoryview(self.mm).cast("Q")  # one 8-byte copy per access (Memory ordering, rule 7)
        self.lock = threading.Lock()
        self.sleeps = 0
        self.start_up()

    # Memory ordering: single aligned 64-bit accesses; a fence for rule 4.
    def ld(self, off):
        return self.w[off >> 3]

    def st(self, off, v):
        self.w[off >> 3] = v & 0xFFFFFFFFFFFFFFFF

    def fence(self):
        self.lock.acquire()  # locked instructions in CPython: a full barrier on x86-64
        self.lock.release()

    def start_up(self):
        """Starting up: identity, geometry, and where the previous driver left the rings."""
        if self.ld(MAGIC) != MAGIC_VALUE or self.ld(ABI_VERSION) != ABI:
            raise RuntimeError(f"not a dimmnet device of ABI {ABI}")
        if self.ld(STATE) != STATE_RUNNING:
            raise DeviceGone(f"STATE {self.ld(STATE)}")
        size = len(self.mm)
        self.node = self.ld(NODE_ID)
        self.cmdq, self.ncmd = self.ld(CMDQ_OFF), self.ld(CMDQ_ENTRIES)
        self.statq, self.nstat = self.ld(STATQ_OFF), self.ld(STATQ_ENTRIES)
        self.lm, self.lm_size = self.ld(LINKMEM_OFF), self.ld(LINKMEM_SIZE)
        pow2 = lambda n: n > 0 and n & (n - 1) == 0
        if (self.ld(REGION_SIZE) != size or not pow2(self.ncmd) or not pow2(self.nstat)
                or self.cmdq + self.ncmd * DESC_SIZE > size or self.statq + self.nstat * STATUS_SIZE > size
                or self.lm + self.lm_size > size):
            raise RuntimeError("geometry outside the region")
        self.gpid = self.node * self.ld(PROCS_PER_NODE)  # process 0 of this node
        # The first index at or above CMDQ_HEAD whose slot is not published.
        idx = self.ld(CMDQ_HEAD)
        while self.ld(self.slot(idx) + SEQ_OFF) == idx + 1:
            idx += 1
        self.first_index = self.next_index = idx
        # Discard the previous driver's statuses.
        self.head = self.ld(STATQ_TAIL)
        self.st(STATQ_HEAD, self.head)
        self.alive, self.alive_at = self.ld(ALIVE), time.monotonic()

    def slot(self, idx):
        return self.cmdq + (idx & (self.ncmd - 1)) * DESC_SIZE

    def ring(self):
        """The doorbell: peer 0's eventfd. DOORBELL in the page is only a count."""
        self.st(DOORBELL, self.ld(DOORBELL) + 1)
        os.write(self.doorbell, (1).to_bytes(8, "little"))

    def post(self, opcode, flags=0, dst_node=0, dst_proc=0, length=0, local=0, remote=0, cookie=0, imm=0):
        """Publishing a command; returns its index (END of its completion)."""
        idx = self.next_index
        if idx - self.ld(CMDQ_HEAD) >= self.ncmd:
            raise RuntimeError("command queue full")
        s = self.slot(idx)
        words = [opcode | flags << 8 | dst_node << 16 | dst_proc << 32, self.gpid | length << 32,
                 local, remote, cookie, imm, 0]
        for i, v in enumerate(words):  # words 0 to 6
            self.st(s + 8 * i, v)
        self.st(s + SEQ_OFF, idx + 1)  # SEQ last: published
        self.next_index = idx + 1
        self.st(CMDQ_TAIL, idx + 1)  # for inspectors
        self.fence()  # SEQ store, then DEV_SLEEP load
        if self.ld(DEV_SLEEP):
            self.ring()
        return idx

    def poll(self):
        """Consuming statuses: the next entry, or None."""
        if self.ld(STATQ_TAIL) == self.head:
            return None
        e = self.statq + (self.head & (self.nstat - 1)) * STATUS_SIZE
        w = [self.ld(e + 8 * i) for i in range(8)]
        self.head += 1
        self.st(STATQ_HEAD, self.head)  # after reading the entry
        return {"type": w[0] & 0xFF, "flags": w[0] >> 8 & 0xFF, "src_node": w[0] >> 16 & 0xFFFF,
                "src_proc": w[0] >> 32, "msg_id": w[1] & 0xFFFFFFFF, "length": w[1] >> 32,
                "offset": w[2] & 0xFFFFFFFF, "opcode": w[2] >> 32 & 0xFF, "amt": w[2] >> 48,
                "err": w[3] & 0xFFFF, "addr": w[4], "end": w[5], "cookie": w[6], "imm": w[7]}

    def wait(self, timeout_s=10.0, spin_s=0.0002):
        """Waiting for statuses: poll a while, then sleep on the interrupt."""
        start = time.monotonic()
        while True:
            s = self.poll()
            if s is not None:
                return s
            now = time.monotonic()
            if now - start > timeout_s:
                raise TimeoutError("no status")
            if now - start < spin_s:
                continue
            self.st(DRV_WAIT, 1)  # STATQ_HEAD is already published (poll stores it)
            self.fence()  # DRV_WAIT store, then STATQ_TAIL load
            try:
                if self.ld(STATQ_TAIL) != self.head:
                    continue
                self.sleeps += 1
                ready, _, _ = select.select([self.irq, self.sock], [], [], SLEEP_S)
                if self.irq in ready:
                    os.read(self.irq, 8)
                if self.sock in ready:
                    self.server_message()
            finally:
                self.st(DRV_WAIT, 0)
            self.liveness()

    def server_message(self):
        peer, fd = recv_msg(self.sock)
        if fd >= 0:
            os.close(fd)  # a new peer's vector: not ours
        elif peer == 0:
            raise DeviceGone("peer 0 (the device) left")

    def liveness(self):
        state = self.ld(STATE)
        if state != STATE_RUNNING:
            raise DeviceGone(f"STATE {state}")
        a, now = self.ld(ALIVE), time.monotonic()
        if a != self.alive:
            self.alive, self.alive_at = a, now
        elif now - self.alive_at > STALE_S:
            raise DeviceGone("ALIVE stale")

    def wait_completion(self, idx, kept):
        """The completion of command idx; other statuses go to kept."""
        while True:
            s = self.wait()
            if s["type"] in (ST_DONE, ST_ERROR, ST_PULL_DONE) and s["end"] == idx:
                return s
            kept.append(s)

    def linkmem(self, addr, n):
        return self.mm[self.lm + addr:self.lm + addr + n]

    def copy_in(self, addr, data):
        self.mm[self.lm + addr:self.lm + addr + len(data)] = data

    def close(self):
        self.w.release()
        self.mm.close()
        for fd in (self.doorbell, self.irq):
            os.close(fd)
        self.sock.close()


def fail(msg):
    print(f"pydriver: FAIL: {msg}", flush=True)
    sys.exit(1)


def sockets():
    """The two nodes' sockets: given, or node0 and node1 of a directory."""
    args = sys.argv[1:]
    if len(args) == 2:
        return args
    d = args[0] if len(args) == 1 else os.environ.get("DIMMNET_DIR")
    if len(args) > 2 or not d:
        print("\n".join(l.strip() for l in __doc__.strip().splitlines()[2:4]), file=sys.stderr)
        sys.exit(2)
    return [os.path.join(d, "node0.sock"), os.path.join(d, "node1.sock")]


def main():
    paths = sockets()
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"pydriver: written for x86-64 ordering, running on {platform.machine()}", file=sys.stderr)
    a, b = Device(paths[0]), Device(paths[1])
    print(f"pydriver: node {a.node} (peer {a.peer}, first command index {a.first_index}) "
          f"-> node {b.node} (peer {b.peer})", flush=True)

    n, remote, cookie = 10000, 1 << 20, 0xC0FFEE
    if not (b.ld(WIN_BASE) <= remote and remote + n <= b.ld(WIN_BASE) + b.ld(WIN_SIZE)):
        fail("node's window does not cover the target")
    data = bytes((i * 7 + 3) & 0xFF for i in range(n))
    a.copy_in(0, data)
    kept = []
    idx = a.post(OP_PUSH, FLAG_SIGNAL, dst_node=b.node, dst_proc=b.node * b.ld(PROCS_PER_NODE),
                 length=n, local=0, remote=remote, cookie=cookie)
    done = a.wait_completion(idx, kept)
    if done["type"] != ST_DONE or done["cookie"] != cookie or done["opcode"] != OP_PUSH or done["length"] != n:
        fail(f"sender got {ST_NAMES.get(done['type'])} {done}")
    got = b.wait()
    if (got["type"] != ST_PUSH or got["addr"] != remote or got["length"] != n
            or got["src_node"] != a.node or got["src_proc"] != a.gpid):
        fail(f"receiver got {ST_NAMES.get(got['type'])} {got}")
    if b.linkmem(remote, n) != data:
        fail("receiver's link memory differs from what was sent")
    print(f"pydriver: PUSH {n} B: DONE for command {done['end']} on node {a.node}, "
          f"PUSH status at {got['addr']:#x} on node {b.node}, bytes equal", flush=True)

    # IPUSH rings: set up AMT entry 1 on b (BASE, HEAD, TAIL, then SIZE|FLAGS
    # last), IPUSH into it naming the entry (DIRECT_AMT), read the message
    # where its status says, and free it by moving HEAD to the status's END.
    amt, ring, ring_size, m = 1, 4 << 20, 64 << 10, 3000
    if b.ld(AMT_ENTRIES) <= amt:
        fail("no AMT entry 1")
    e = b.ld(AMT_OFF) + amt * AMT_SIZE
    b.st(e + AMT_CFG, 0)  # invalid while it is set up
    b.st(e + AMT_BASE, ring)
    b.st(e + AMT_HEAD, 0)
    b.st(e + AMT_TAIL, 0)
    b.st(e + AMT_CFG, ring_size | AMT_VALID << 32)
    msg = bytes((i * 13 + 1) & 0xFF for i in range(m))
    a.copy_in(64 << 10, msg)
    idx = a.post(OP_IPUSH, FLAG_SIGNAL | FLAG_DIRECT_AMT, dst_node=b.node, length=m, local=64 << 10,
                 remote=amt, cookie=cookie + 2)
    done = a.wait_completion(idx, kept)
    if done["type"] != ST_DONE or done["cookie"] != cookie + 2:
        fail(f"IPUSH sender got {ST_NAMES.get(done['type'])} {done}")
    got = b.wait()
    if got["type"] != ST_IPUSH_MSG or got["amt"] != amt or got["length"] != m:
        fail(f"IPUSH receiver got {ST_NAMES.get(got['type'])} {got}")
    if b.linkmem(got["addr"], m) != msg:  # ADDR is absolute (a link address)
        fail("IPUSH message differs from what was sent")
    b.st(e + AMT_HEAD, got["end"])  # the ring is free again
    print(f"pydriver: IPUSH {m} B into AMT entry {amt}: message at {got['addr']:#x}, bytes equal", flush=True)

    # A misaligned PUSH fails, SIGNAL or not: ERROR names it by END.
    bad = a.post(OP_PUSH, 0, dst_node=b.node, length=8, local=4, remote=remote, cookie=cookie + 1)
    err = a.wait_completion(bad, kept)
    reg = a.ld(ERROR)
    if (err["type"] != ST_ERROR or err["err"] != E_BAD_ALIGN or err["opcode"] != OP_PUSH
            or err["cookie"] != cookie + 1 or reg & 0xFFFF != E_BAD_ALIGN or reg >> 32 != bad & 0xFFFFFFFF):
        fail(f"misaligned PUSH: {ST_NAMES.get(err['type'])} {err}, ERROR register {reg:#x}")
    print(f"pydriver: misaligned PUSH: ERROR BAD_ALIGN for command {err['end']}; "
          f"{a.sleeps + b.sleeps} sleeps on the interrupt, {len(kept)} other statuses", flush=True)
    a.close()
    b.close()
    print("ok", flush=True)


if __name__ == "__main__":
    try:
        main()
    except (DeviceGone, RuntimeError, TimeoutError, OSError) as e:
        fail(e)
