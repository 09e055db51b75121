// Command gendatasheet writes docs/datasheet.md from package uapi; run it
// with go generate ./uapi after changing the ABI.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/dimmnet/dimmnet/uapi/datasheet"
)

func main() {
	out := flag.String("o", "docs/datasheet.md", "output file")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(datasheet.Render()), 0o644); err != nil {
		log.Fatalf("gendatasheet: %v", err)
	}
}
