package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function under cmd/ may be: a command
// parses its flags and calls one package function, where the logic lives.
const maxFuncLines = 60

// stillLong are the functions under cmd/ not yet thinned (issue 32), each
// at its length when the rule came in: one may shrink, never grow, and
// leaves this list once it is within the rule (the test says so).
var stillLong = map[string]int{}

// TestCommandsStayThin walks every Go file under cmd/ and fails on a
// function longer than maxFuncLines that is not on stillLong, or one on
// it that grew.
func TestCommandsStayThin(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			key := filepath.ToSlash(rel) + " " + fn.Name.Name
			seen[key] = true
			switch was, listed := stillLong[key]; {
			case listed && n > was:
				t.Errorf("%s: %d lines, grew from %d; move its logic into a package", key, n, was)
			case listed && n <= maxFuncLines:
				t.Errorf("%s: %d lines, within the rule now: take it off stillLong", key, n)
			case !listed && n > maxFuncLines:
				t.Errorf("%s: %d lines, over %d; parse flags here and call a package function", key, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range stillLong {
		if !seen[key] {
			t.Errorf("%s is on stillLong but no longer exists: take it off", key)
		}
	}
}
