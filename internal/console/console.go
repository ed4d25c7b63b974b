package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/warrenmq/broker/internal/queueargs"
)

//go:embed assets
var assets embed.FS

// file is one embedded asset with its type and content hash.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// files are the assets by the path they are served at: index.html at
// "/", the others under "/console/".
var files = func() map[string]file {
	out := make(map[string]file)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "assets/")
		url := "/console/" + name
		if name == "index.html" {
			url = "/"
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[url] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("console: embedded assets unreadable: " + err.Error()) // a broken build, not input
	}
	out["/console/args.js"] = argsScript()
	return out
}()

// argsScript is the asset /console/args.js: the abbreviations of the
// queue arguments the Features column shows, from the one argument
// table (queueargs.Shorts), so that the page never keeps a list of its
// own.
func argsScript() file {
	shorts, err := json.Marshal(queueargs.Shorts())
	if err != nil {
		panic("console: argument abbreviations do not encode: " + err.Error()) // a broken build, not input
	}
	body := []byte("// Generated from internal/queueargs: argument name to Features abbreviation.\nwindow.WARREN_ARG_SHORTS = " + string(shorts) + ";\n")
	sum := sha256.Sum256(body)
	return file{body: body, contentType: mime.TypeByExtension(".js"), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// csp lets the page load only its own scripts, styles and images and
// talk only to its own origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Handler returns api with the console in front of it: GET or HEAD of "/"
// (and "/index.html") is the page, "/console/..." its assets; every other
// request goes to api, with the WWW-Authenticate header dropped from
// answers to the page's own calls (see the package doc).
func Handler(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/index.html" {
			p = "/"
		}
		f, isAsset := files[p]
		if !isAsset && strings.HasPrefix(p, "/console/") {
			http.NotFound(w, r)
			return
		}
		if !isAsset {
			if r.Header.Get("X-Requested-With") == "XMLHttpRequest" {
				w = noChallenge{w}
			}
			api.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		if p == "/" {
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "no-referrer")
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}

// noChallenge drops WWW-Authenticate from the answer, so that a browser
// leaves a failed login to the page.
type noChallenge struct{ http.ResponseWriter }

func (n noChallenge) WriteHeader(code int) {
	n.Header().Del("WWW-Authenticate")
	n.ResponseWriter.WriteHeader(code)
}

func (n noChallenge) Write(b []byte) (int, error) {
	n.Header().Del("WWW-Authenticate")
	return n.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush, which
// the API's streamed get answers use.
func (n noChallenge) Unwrap() http.ResponseWriter { return n.ResponseWriter }
