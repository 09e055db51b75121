package subproc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func init() {
	Register("echo-args", func(args []string) error {
		_, err := os.Stdout.WriteString(strings.Join(args, ",") + "\n")
		return err
	})
	Register("fail", func([]string) error { return errors.New("asked to fail") })
}

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// A child runs the named role with its arguments, in a fresh process.
func TestChildRunsRole(t *testing.T) {
	c, err := Command("echo-args", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c.Stdout = &out
	if err := c.Run(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if got := out.String(); got != "a,b\n" {
		t.Fatalf("child printed %q, want \"a,b\\n\"", got)
	}
}

// A failing role exits non-zero and says why on stderr.
func TestChildFailureIsReported(t *testing.T) {
	c, err := Command("fail")
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	c.Stderr = &errOut
	err = c.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("child exit: %v, want status 1", err)
	}
	if !strings.Contains(errOut.String(), "asked to fail") {
		t.Fatalf("stderr %q does not name the failure", errOut.String())
	}
}
