// Command genwire rewrites the generated regions of docs/wire.md and the
// Wireshark dissector from package wire's tables, so a type, flag, NACK
// code or field added there reaches both; run it with
// go generate ./vdev/wire.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/dimmnet/dimmnet/vdev/wire/wiredoc"
)

func main() {
	md := flag.String("md", "docs/wire.md", "the wire format document")
	lua := flag.String("lua", "tools/wireshark/dimmnet.lua", "the Wireshark dissector")
	flag.Parse()
	for _, f := range []struct {
		path   string
		render func(string) (string, error)
	}{{*md, wiredoc.Markdown}, {*lua, wiredoc.Lua}} {
		if err := rewrite(f.path, f.render); err != nil {
			log.Fatalf("genwire: %v", err)
		}
	}
}

// rewrite renders path's generated regions, writing only on change so an
// up-to-date file keeps its timestamp.
func rewrite(path string, render func(string) (string, error)) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	s, err := render(string(old))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if s == string(old) {
		return nil
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
