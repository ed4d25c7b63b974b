package server

import (
	"os"
	"path/filepath"
	"runtime"
)

// defaultDataDir is -data's default: the per-user data directory the
// platform documents, so the broker finds its data again wherever it is
// started from: $XDG_DATA_HOME/warren, else ~/.local/share/warren (the XDG
// Base Directory specification), ~/Library/Application Support/warren on
// macOS, %LocalAppData%\warren on Windows. Only without a home directory
// is it ./warren-data, in the working directory.
func defaultDataDir() string {
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "warren")
		}
	case "darwin", "ios":
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, "Library", "Application Support", "warren")
		}
	default:
		// The specification ignores a relative XDG_DATA_HOME.
		if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
			return filepath.Join(d, "warren")
		}
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, ".local", "share", "warren")
		}
	}
	return "warren-data"
}

// absDir is dir made absolute, for the log line that says where the data
// is; dir itself when the working directory is unknown.
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
