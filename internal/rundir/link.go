package rundir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// LinkFile is the file in a daemon's directory that describes its link,
// for `dimmnet devices`: the register page has no word for it (a device
// does not know what carries its frames).
const LinkFile = "link.json"

// Link describes what joins a daemon's devices to others.
type Link struct {
	Kind  string   `json:"kind"`  // mem, udp, afpacket, tap, fabric
	Nodes []uint16 `json:"nodes"` // the daemon's own devices
	// Peers are every node the link reaches, the daemon's own included;
	// nil where the link learns them from the wire (afpacket, tap).
	Peers []uint16 `json:"peers"`
}

// WriteLink records l in dir (the daemon's directory), readable by
// whoever may attach to its sockets.
func WriteLink(dir string, l Link) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, LinkFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("rundir: write %s: %w", p, err)
	}
	return os.Rename(tmp, p)
}

// ReadLink reads a daemon's link description; a daemon that wrote none
// gives an error wrapping fs.ErrNotExist.
func ReadLink(dir string) (Link, error) {
	var l Link
	b, err := os.ReadFile(filepath.Join(dir, LinkFile))
	if err != nil {
		return l, fmt.Errorf("rundir: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("rundir: %s: %w", LinkFile, err)
	}
	return l, nil
}
