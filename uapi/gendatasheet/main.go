// Command gendatasheet writes docs/datasheet.md, the C header
// uapi/dimmnet.h and the Python module uapi/dimmnet_uapi.py from package
// uapi; run it with go generate ./uapi after changing the ABI, so the three
// forms a driver writer reads never disagree with the code.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/dimmnet/dimmnet/uapi/datasheet"
)

func main() {
	out := flag.String("o", "docs/datasheet.md", "datasheet output file")
	hdr := flag.String("h", "", "C header output file (none: not written)")
	py := flag.String("py", "", "Python module output file (none: not written)")
	flag.Parse()
	for _, f := range []struct {
		path string
		text func() string
	}{{*out, datasheet.Render}, {*hdr, datasheet.Header}, {*py, datasheet.Python}} {
		if f.path == "" {
			continue
		}
		if err := os.WriteFile(f.path, []byte(f.text()), 0o644); err != nil {
			log.Fatalf("gendatasheet: %v", err)
		}
	}
}
