package auth

import "os"

// writeFile writes s with exactly mode (the umask does not narrow it).
func writeFile(path, s string, mode uint32) error {
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, os.FileMode(mode))
}
