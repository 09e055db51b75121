package regfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dimmnet/dimmnet/uapi"
)

// Device is one device to show: its directory name under the mount point
// (e.g. "node0") and its mapped region. The region is only read (and, with
// Options.Writable, written) through the mapping, so any attach method that
// yields the bytes will do.
type Device struct {
	Name   string
	Region []byte
}

// Options chooses what the mount allows.
type Options struct {
	// Writable lets read-write registers and link memory be written. Off
	// by default because a stray write to CMDQ_TAIL or STATQ_HEAD under a
	// running driver corrupts its queues: inspecting must be safe.
	Writable bool
}

// Modes of the files: what a user may do with them, shown by ls -l. The
// kernel does not enforce them (no default_permissions); Open does.
const (
	modeRO = 0o444
	modeRW = 0o644
)

// Mount mounts a view of devs on mountpoint (an existing directory) and
// serves it until the returned server is unmounted with Unmount. Each
// region is validated first (size and alignment, magic, ABI version,
// geometry); the geometry read then is the one regfs indexes the region
// with for the life of the mount, so a driver scribbling on the register
// page cannot make regfs read outside the mapping. As root it mounts with
// mount(2) directly; otherwise it lets go-fuse fall back to fusermount3.
func Mount(mountpoint string, devs []Device, opts Options) (*fuse.Server, error) {
	if len(devs) == 0 {
		return nil, errors.New("regfs: no devices to mount")
	}
	seen := map[string]bool{}
	geos := make([]uapi.Geometry, len(devs))
	for i, d := range devs {
		if d.Name == "" || d.Name == "." || d.Name == ".." || strings.ContainsAny(d.Name, "/\x00") {
			return nil, fmt.Errorf("regfs: bad device name %q", d.Name)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("regfs: device name %q given twice", d.Name)
		}
		seen[d.Name] = true
		g, err := checkRegion(d.Region)
		if err != nil {
			return nil, fmt.Errorf("regfs: %s: %w", d.Name, err)
		}
		geos[i] = g
	}
	root := &dirNode{made: time.Now()}
	zero := time.Duration(0)
	asRoot := os.Geteuid() == 0
	o := &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:            "dimmnet",
			Name:              "dimmnet",
			DisableXAttrs:     true,
			DirectMountStrict: asRoot,
			DirectMount:       !asRoot,
		},
		OnAdd: func(ctx context.Context) {
			for i, d := range devs {
				addDevice(ctx, &root.Inode, d.Name, uapi.Region(d.Region), geos[i], opts.Writable)
			}
		},
	}
	srv, err := fs.Mount(mountpoint, root, o)
	if err != nil {
		return nil, fmt.Errorf("regfs: mount %s: %w", mountpoint, err)
	}
	return srv, nil
}

// mkdir adds a directory called name under parent.
func mkdir(ctx context.Context, parent *fs.Inode, name string) *fs.Inode {
	d := parent.NewPersistentInode(ctx, &dirNode{made: time.Now()}, fs.StableAttr{Mode: syscall.S_IFDIR})
	parent.AddChild(name, d, false)
	return d
}

// dirNode is a directory of the tree. Its entries are fixed by the ABI, so
// it is shown read-only (0555) with the time the mount was made.
type dirNode struct {
	fs.Inode
	made time.Time
}

var _ fs.NodeGetattrer = (*dirNode)(nil)

// Getattr reports a read-only directory with the classic link count (2 +
// subdirectories), which find and ls expect.
func (n *dirNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = 0o555
	nlink := uint32(2)
	for _, ch := range n.Children() {
		if ch.IsDir() {
			nlink++
		}
	}
	out.Nlink = nlink
	out.SetTimes(&n.made, &n.made, &n.made)
	return 0
}

// addFile adds a regular file called name under parent.
func addFile(ctx context.Context, parent *fs.Inode, name string, node fs.InodeEmbedder) {
	parent.AddChild(name, parent.NewPersistentInode(ctx, node, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// addDevice builds one device's tree under parent.
func addDevice(ctx context.Context, parent *fs.Inode, name string, r uapi.Region, g uapi.Geometry, writable bool) {
	dev := mkdir(ctx, parent, name)
	ro := func(render func() string) *textNode { return &textNode{render: render} }

	addFile(ctx, dev, "info", ro(func() string { return infoText(r) }))

	regs := mkdir(ctx, dev, "registers")
	for _, reg := range uapi.Registers {
		n := ro(func() string { return registerText(r, reg) + "\n" })
		if reg.Access == uapi.RW {
			n.store = func(v uint64) { r.Store64(reg.Off, v) }
			n.writable = writable
		}
		addFile(ctx, regs, reg.Name, n)
	}

	ctrs := mkdir(ctx, dev, "counters")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		addFile(ctx, ctrs, c.String(), ro(func() string { return counterText(r, c) + "\n" }))
	}

	trace := mkdir(ctx, dev, "trace")
	for i, n := range uapi.TraceNames {
		addFile(ctx, trace, n, ro(func() string { return traceText(r, i) + "\n" }))
	}

	word := func(off uint32) func() string {
		return func() string { return strconv.FormatUint(r.Load64(off), 10) + "\n" }
	}
	cmdq := mkdir(ctx, dev, "cmdq")
	addFile(ctx, cmdq, "head", ro(word(uapi.RegCmdqHead)))
	addFile(ctx, cmdq, "tail", ro(word(uapi.RegCmdqTail)))
	addFile(ctx, cmdq, "entries", ro(func() string { return cmdqText(r, g) }))
	statq := mkdir(ctx, dev, "statq")
	addFile(ctx, statq, "head", ro(word(uapi.RegStatqHead)))
	addFile(ctx, statq, "tail", ro(word(uapi.RegStatqTail)))
	addFile(ctx, statq, "entries", ro(func() string { return statqText(r, g) }))

	amt := mkdir(ctx, dev, "amt")
	for i := uint64(0); i < g.AMTEntries; i++ {
		addFile(ctx, amt, strconv.FormatUint(i, 10), ro(func() string { return amtText(r, g, i) }))
	}
	addFile(ctx, dev, "amtat", ro(func() string { return amtatText(r, g) }))
	addFile(ctx, dev, "violations", ro(func() string { return violationsText(r) }))

	addFile(ctx, dev, "linkmem", &memNode{mem: r[g.LinkMemOff : g.LinkMemOff+g.LinkMemSize], writable: writable})
}

// textNode is a file whose content is rendered from the region on every
// read: a register, counter, trace stamp or decoded table. With store set
// and writable, a write of one number stores it.
type textNode struct {
	fs.Inode
	render   func() string
	store    func(uint64) // nil: the file is read-only whatever the options
	writable bool
}

var (
	_ fs.NodeOpener    = (*textNode)(nil)
	_ fs.NodeGetattrer = (*textNode)(nil)
	_ fs.NodeReader    = (*textNode)(nil)
	_ fs.NodeWriter    = (*textNode)(nil)
	_ fs.NodeSetattrer = (*textNode)(nil)
)

// wantsWrite reports whether open flags ask for write access.
func wantsWrite(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// Open refuses write access to a file that cannot be written and asks the
// kernel for direct I/O, so each read reaches Read and shows the live value.
func (n *textNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if wantsWrite(flags) && !n.canWrite() {
		return nil, 0, syscall.EACCES
	}
	return &snapshot{}, fuse.FOPEN_DIRECT_IO, 0
}

// snapshot is an open text file's content: rendered afresh by a read at
// offset 0 and kept for the reads that continue it, so a value that changes
// between two read(2) calls never yields a torn line (as seq_file does).
type snapshot struct {
	mu   sync.Mutex
	text string
}

func (n *textNode) canWrite() bool { return n.writable && n.store != nil }

// Getattr reports the length the file would have if read now, so ls -l and
// stat-sized reads see its content; reads do not depend on it.
func (n *textNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	mode := uint32(modeRO)
	if n.canWrite() {
		mode = modeRW
	}
	fillAttr(out, mode, uint64(len(n.render())))
	return 0
}

// Read renders the content afresh at offset 0 and returns the part at off
// (later offsets come from the open file's snapshot).
func (n *textNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var s string
	if snap, ok := f.(*snapshot); ok {
		snap.mu.Lock()
		if off == 0 || snap.text == "" {
			snap.text = n.render()
		}
		s = snap.text
		snap.mu.Unlock()
	} else {
		s = n.render()
	}
	if off >= int64(len(s)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(dest[:copy(dest, s[off:])]), 0
}

// Write parses one decimal or 0x-hex number and stores it in the register.
// The whole write is the value: `echo 5 > f` arrives as one write of "5\n".
func (n *textNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if !n.canWrite() {
		return 0, syscall.EACCES
	}
	v, err := parseValue(data)
	if err != nil {
		return 0, syscall.EINVAL
	}
	n.store(v)
	return uint32(len(data)), 0
}

// Setattr accepts what a shell redirect or os.WriteFile sends before the
// write (truncate to 0, which changes nothing: a register has no length)
// and time updates; it refuses other sizes and ownership or mode changes.
func (n *textNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := checkSetattr(in); errno != 0 {
		return errno
	}
	if sz, ok := in.GetSize(); ok {
		if !n.canWrite() {
			return syscall.EACCES
		}
		if sz != 0 {
			return syscall.EINVAL
		}
	}
	return n.Getattr(ctx, f, out)
}

// checkSetattr refuses mode and ownership changes: the tree's shape and
// permissions are fixed by the ABI.
func checkSetattr(in *fuse.SetAttrIn) syscall.Errno {
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	return 0
}

// fillAttr sets the attributes every file shares.
func fillAttr(out *fuse.AttrOut, mode uint32, size uint64) {
	out.Mode = mode
	out.Nlink = 1
	out.Size = size
	out.Blksize = 4096
	out.Blocks = (size + 511) / 512
	now := time.Now()
	out.SetTimes(&now, &now, &now)
}

// memNode is link memory as a raw file the size of LINKMEM_SIZE, like a
// block device: read and (with Options.Writable) written at any offset.
type memNode struct {
	fs.Inode
	mem      []byte
	writable bool
}

var (
	_ fs.NodeOpener    = (*memNode)(nil)
	_ fs.NodeGetattrer = (*memNode)(nil)
	_ fs.NodeReader    = (*memNode)(nil)
	_ fs.NodeWriter    = (*memNode)(nil)
	_ fs.NodeSetattrer = (*memNode)(nil)
)

// Open refuses write access unless the mount is writable, and asks for
// direct I/O so reads see link memory as it is now, not a cached page.
func (n *memNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if wantsWrite(flags) && !n.writable {
		return nil, 0, syscall.EACCES
	}
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

// Getattr reports the size of link memory.
func (n *memNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	mode := uint32(modeRO)
	if n.writable {
		mode = modeRW
	}
	fillAttr(out, mode, uint64(len(n.mem)))
	return 0
}

// Read copies link memory at off; at or past the end it returns EOF.
func (n *memNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off < 0 || off >= int64(len(n.mem)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(dest[:copy(dest, n.mem[off:])]), 0
}

// Write copies data into link memory at off; past the end is ENOSPC, and a
// write crossing the end is short, as on a full device.
func (n *memNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if !n.writable {
		return 0, syscall.EACCES
	}
	if off < 0 || off >= int64(len(n.mem)) {
		return 0, syscall.ENOSPC
	}
	return uint32(copy(n.mem[off:], data)), 0
}

// Setattr accepts a truncate to any size within link memory as a no-op
// (link memory has a fixed size, like a disk; dd without conv=notrunc asks
// for one) and refuses growing it, mode and ownership changes.
func (n *memNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := checkSetattr(in); errno != 0 {
		return errno
	}
	if sz, ok := in.GetSize(); ok {
		if !n.writable {
			return syscall.EACCES
		}
		if sz > uint64(len(n.mem)) {
			return syscall.EFBIG
		}
	}
	return n.Getattr(ctx, f, out)
}
