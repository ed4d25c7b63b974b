package packaging

import (
	"fmt"
	"strings"
)

// instruction is one Dockerfile instruction: its keyword in capitals, its
// arguments with line continuations joined, and the line it starts on.
type instruction struct {
	Cmd, Args string
	Line      int
}

// keywords are the Dockerfile instructions (Dockerfile reference, syntax 1).
var keywords = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "EXPOSE": true, "ENV": true,
	"ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true,
	"WORKDIR": true, "ARG": true, "ONBUILD": true, "STOPSIGNAL": true,
	"HEALTHCHECK": true, "SHELL": true, "MAINTAINER": true,
}

// parseDockerfile splits text into instructions: comment lines (# first)
// and blank lines are skipped, a line ending in a backslash continues on
// the next, the first word is the instruction (any case). An unknown
// instruction, one without arguments, a continuation at the end of the
// file, or a file whose first instruction is not FROM or ARG is an
// error with its line.
func parseDockerfile(text string) ([]instruction, error) {
	var out []instruction
	var cur *instruction
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if cur == nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur != nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue // a blank or comment line inside a continued instruction, as Docker skips them
		}
		cont := strings.HasSuffix(trimmed, "\\")
		trimmed = strings.TrimSpace(strings.TrimSuffix(trimmed, "\\"))
		if cur == nil {
			word, rest, _ := strings.Cut(trimmed, " ")
			word = strings.ToUpper(word)
			if !keywords[word] {
				return nil, fmt.Errorf("line %d: unknown instruction %q", n, word)
			}
			cur = &instruction{Cmd: word, Args: strings.TrimSpace(rest), Line: n}
		} else if trimmed != "" {
			if cur.Args != "" {
				cur.Args += " "
			}
			cur.Args += trimmed
		}
		if !cont {
			if cur.Args == "" {
				return nil, fmt.Errorf("line %d: %s without arguments", cur.Line, cur.Cmd)
			}
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: %s continues past the end of the file", cur.Line, cur.Cmd)
	}
	if len(out) > 0 && out[0].Cmd != "FROM" && out[0].Cmd != "ARG" {
		return nil, fmt.Errorf("line %d: the first instruction is %s, not FROM", out[0].Line, out[0].Cmd)
	}
	return out, nil
}

// stage is one build stage: its FROM image, its name (AS ...), and its
// instructions after FROM.
type stage struct {
	Image, Name string
	Body        []instruction
}

// stages groups instructions by FROM.
func stages(ins []instruction) ([]stage, error) {
	var out []stage
	for _, in := range ins {
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := stage{}
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:] // --platform=...
			}
			switch {
			case len(f) == 1:
				st.Image = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.Image, st.Name = f[0], f[2]
			default:
				return nil, fmt.Errorf("line %d: FROM %s is not image [AS name]", in.Line, in.Args)
			}
			out = append(out, st)
			continue
		}
		if len(out) == 0 {
			if in.Cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("line %d: %s before FROM", in.Line, in.Cmd)
		}
		out[len(out)-1].Body = append(out[len(out)-1].Body, in)
	}
	return out, nil
}
