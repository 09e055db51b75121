package regfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// Serve mounts devs on mountpoint, says so on out, and serves the view
// until ctx ends (then unmounts) or the mount is taken away from outside
// (umount). The caller makes ctx before Serve so that a signal from the
// moment the view can be seen unmounts it rather than killing the
// command and leaving the mount behind. The server's Unmount also waits
// for its request loops, which a request stuck in the kernel can hold for
// ever: Serve bounds it, then detaches the mount lazily, so it always
// returns.
func Serve(ctx context.Context, mountpoint string, devs []Device, opts Options, out io.Writer) error {
	srv, err := Mount(mountpoint, devs, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	fmt.Fprintf(out, "mounted %d devices on %s (%s); Ctrl-C unmounts\n", len(devs), mountpoint, map[bool]string{true: "read-write", false: "read-only"}[opts.Writable])
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-ctx.Done():
	case <-done: // unmounted from outside (umount)
		return nil
	}
	unmounted := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			err := srv.Unmount()
			if err == nil || i == 20 {
				unmounted <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	select {
	case err := <-unmounted:
		if err != nil {
			return fmt.Errorf("unmount %s: %w (a file is still open?)", mountpoint, err)
		}
		return nil
	case <-time.After(5 * time.Second):
		if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: the server did not stop, and a lazy unmount failed: %w", mountpoint, err)
		}
		return nil
	}
}
