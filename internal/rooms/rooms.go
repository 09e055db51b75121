// Package rooms reads the table of rooms and the imports they may make
// from docs/design.md and checks a module's imports against it, so the
// order the tree is built in is written once, where a newcomer reads it,
// and a test keeps it true.
package rooms

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// ErrTable is returned for a rooms table that does not parse: no table,
// a row without three cells, a room named twice, or a may-import cell
// naming a room the table does not have.
var ErrTable = errors.New("rooms: bad table")

// Table is the parsed table: each room's package patterns and the rooms
// it may import.
type Table struct {
	rooms    []string
	patterns []pattern
	may      map[string]map[string]bool
}

// pattern is one package entry: an exact path, or a path and everything
// below it (written path/...).
type pattern struct {
	path    string
	subtree bool
	room    string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// Parse reads the first Markdown table whose header starts with
// "| room | packages | may import |".
func Parse(r io.Reader) (*Table, error) {
	t := &Table{may: map[string]map[string]bool{}}
	sc := bufio.NewScanner(r)
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !in {
			if strings.HasPrefix(line, "| room | packages | may import |") {
				in = true
			}
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			return nil, fmt.Errorf("%w: row %q has %d cells, want 3", ErrTable, line, len(cells))
		}
		room := strings.TrimSpace(cells[0])
		if _, dup := t.may[room]; dup {
			return nil, fmt.Errorf("%w: room %q named twice", ErrTable, room)
		}
		t.rooms = append(t.rooms, room)
		for _, m := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			p := pattern{path: m[1], room: room}
			if rest, ok := strings.CutSuffix(p.path, "/..."); ok {
				p.path, p.subtree = rest, true
			}
			t.patterns = append(t.patterns, p)
		}
		t.may[room] = map[string]bool{}
		for _, m := range strings.Split(cells[2], ",") {
			if m = strings.TrimSpace(m); m != "" {
				t.may[room][m] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rooms: read table: %w", err)
	}
	if len(t.rooms) == 0 {
		return nil, fmt.Errorf("%w: no \"| room | packages | may import |\" table", ErrTable)
	}
	for _, room := range t.rooms {
		for m := range t.may[room] {
			if _, ok := t.may[m]; !ok {
				return nil, fmt.Errorf("%w: room %q may import %q, which is no room", ErrTable, room, m)
			}
		}
	}
	// Most specific first: longer paths, and an exact path before a
	// subtree of the same path.
	sort.SliceStable(t.patterns, func(i, j int) bool {
		a, b := t.patterns[i], t.patterns[j]
		if len(a.path) != len(b.path) {
			return len(a.path) > len(b.path)
		}
		return !a.subtree && b.subtree
	})
	return t, nil
}

// Rooms lists the rooms in the table's order.
func (t *Table) Rooms() []string { return t.rooms }

// RoomOf is the room of the package at rel (its path inside the module),
// or "" when no entry covers it.
func (t *Table) RoomOf(rel string) string {
	for _, p := range t.patterns {
		if rel == p.path || p.subtree && strings.HasPrefix(rel, p.path+"/") {
			return p.room
		}
	}
	return ""
}

// Package is one package of the module and its non-test imports, both as
// paths inside the module (imports from outside it are left out).
type Package struct {
	Path    string
	Imports []string
}

// Check returns one line per package in no room and per import against
// the table, each naming the importer, the import and their rooms.
func (t *Table) Check(pkgs []Package) []string {
	var bad []string
	for _, p := range pkgs {
		from := t.RoomOf(p.Path)
		if from == "" {
			bad = append(bad, fmt.Sprintf("%s is in no room", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			to := t.RoomOf(imp)
			if to == "" {
				continue // reported as its own package
			}
			if !t.may[from][to] {
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): %s may not import %s", p.Path, from, imp, to, from, to))
			}
		}
	}
	return bad
}
