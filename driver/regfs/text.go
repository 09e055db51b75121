package regfs

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountText mounts a read-only directory of text files whose contents
// render() produces afresh on every read (one file per key). It is how a
// library above the driver (LMMC's tables) shows its state the way the
// device's registers are shown: the file set is the keys render returns at
// mount time.
func MountText(mountpoint string, render func() map[string]string) (*fuse.Server, error) {
	names := make([]string, 0)
	for k := range render() {
		if k == "" || k == "." || k == ".." || strings.ContainsAny(k, "/\x00") {
			return nil, fmt.Errorf("regfs: bad file name %q", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	root := &dirNode{made: time.Now()}
	zero := time.Duration(0)
	asRoot := os.Geteuid() == 0
	o := &fs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{FsName: "dimmnet", Name: "dimmnet", DisableXAttrs: true,
			DirectMountStrict: asRoot, DirectMount: !asRoot},
		OnAdd: func(ctx context.Context) {
			for _, n := range names {
				n := n
				addFile(ctx, &root.Inode, n, &textNode{render: func() string { return render()[n] }})
			}
		},
	}
	srv, err := fs.Mount(mountpoint, root, o)
	if err != nil {
		return nil, fmt.Errorf("regfs: mount %s: %w", mountpoint, err)
	}
	return srv, nil
}
