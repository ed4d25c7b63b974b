package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

const specName = "amqp0-9-1.extended.xml"

func main() {
	specPath := flag.String("spec", "", "path of the spec XML (default: found relative to the working directory)")
	outPath := flag.String("o", "", `output file, "-" for stdout (default: amqp/spec.go from the module root)`)
	flag.Parse()
	if err := run(*specPath, *outPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	fromRoot := true
	if specPath == "" {
		// `go run ./internal/gen` runs in the module root, `go generate` in amqp/.
		candidates := []string{filepath.Join("internal", "gen", specName), filepath.Join("..", "internal", "gen", specName)}
		for i, c := range candidates {
			if _, err := os.Stat(c); err == nil {
				specPath, fromRoot = c, i == 0
				break
			}
		}
		if specPath == "" {
			return errors.New("gen: cannot find " + specName + "; pass -spec")
		}
	}
	if outPath == "" {
		outPath = "spec.go"
		if fromRoot {
			outPath = filepath.Join("amqp", "spec.go")
		}
	}
	xmlBytes, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	src, err := Generate(xmlBytes)
	if err != nil {
		return err
	}
	if outPath == "-" {
		_, err = os.Stdout.Write(src)
		return err
	}
	// Leave the file alone when nothing changed so that builds stay cached.
	if old, err := os.ReadFile(outPath); err == nil && bytes.Equal(old, src) {
		return nil
	}
	if err := os.WriteFile(outPath, src, 0o644); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return nil
}
