package mgmt

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// A browser that has once been given the API's basic-auth credentials
// (a visit to an API URL, answered with the login prompt) sends them
// again with every request to the API, whichever page makes it. Two
// checks keep another site's page from using them to change anything:
//
//   - origin: a state-changing request a page of another origin makes
//     (the browser says so in Sec-Fetch-Site, or in an Origin other than
//     the Host it is sent to) is 403, unless Config.AllowOrigins lists
//     that origin. Requests that carry neither header (curl,
//     rabbitmqadmin, any program) and those of the API's own pages (the
//     console) pass. Go's http.CrossOriginProtection makes the call.
//   - media type: a state-changing request with a body, or with a
//     Content-Type, must say application/json (any parameters), the only
//     type a form cannot send, so a page's plain form post never reaches
//     a handler; 415 otherwise. POST /api/definitions also takes
//     multipart/form-data, RabbitMQ's UI upload.
//
// RabbitMQ's management plugin has neither: it lets any origin write and
// checks the media type only on a few resources (definitions, vhost and
// user limits, operator policies, feature flags), whose 415 has an empty
// body; Warren checks every write and says why in RabbitMQ's error
// object.

// Config is what New takes besides the Broker.
type Config struct {
	// AllowOrigins lists the origins ("https://host[:port]") whose pages
	// may change things through the API, and read its answers (CORS),
	// besides the API's own; "*" allows every origin. RabbitMQ's
	// management.cors.allow_origins. New leaves out entries CheckOrigin
	// refuses.
	AllowOrigins []string
}

// corsMaxAge is how long a browser may cache a preflight's answer, in
// seconds: RabbitMQ's management.cors.max_age default.
const corsMaxAge = "1800"

// CheckOrigins reports every entry of origins that CheckOrigin refuses,
// each named field[i].
func CheckOrigins(field string, origins []string) error {
	var errs []error
	for i, origin := range origins {
		if err := CheckOrigin(origin); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", field, i, err))
		}
	}
	return errors.Join(errs...)
}

// CheckOrigin reports why AllowOrigins cannot take o, nil when it can:
// o must be "*" or an origin, scheme://host[:port] with nothing after it.
func CheckOrigin(o string) error {
	if o == "*" {
		return nil
	}
	if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
		return fmt.Errorf("%q is not an origin (scheme://host[:port]): %w", o, err)
	}
	return nil
}

// originGuard is the origin check and the CORS answers of one handler.
type originGuard struct {
	cop     *http.CrossOriginProtection
	any     bool
	allowed map[string]bool
}

func newOriginGuard(origins []string) *originGuard {
	g := &originGuard{cop: http.NewCrossOriginProtection(), allowed: make(map[string]bool)}
	for _, o := range origins {
		if o == "*" {
			g.any = true
			continue
		}
		if g.cop.AddTrustedOrigin(o) == nil {
			g.allowed[o] = true
		}
	}
	return g
}

// admit sets the CORS headers of r's answer and reports whether r may go
// on; a state-changing request from a foreign origin has been answered
// 403.
func (g *originGuard) admit(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Add("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" && o != "null" && (g.any || g.allowed[o]) {
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if g.any {
		return true
	}
	if err := g.cop.Check(r); err != nil {
		origin := r.Header.Get("Origin")
		if origin == "" {
			origin = "Sec-Fetch-Site " + r.Header.Get("Sec-Fetch-Site")
		}
		WriteError(w, http.StatusForbidden, "forbidden",
			fmt.Sprintf("cross-origin request refused (%s): the management API takes changes only from its own pages and from clients that are not browsers; an operator may allow an origin (management allowed origins)", origin))
		return false
	}
	return true
}

// preflight answers an OPTIONS request for a resource that allows
// methods, as RabbitMQ does (200, Allow), with a CORS preflight's answer
// for an allowed origin. It needs no login: browsers send none with a
// preflight.
func (g *originGuard) preflight(w http.ResponseWriter, r *http.Request, methods []string) {
	allow := strings.Join(methods, ", ")
	h := w.Header()
	h.Set("Allow", allow)
	if h.Get("Access-Control-Allow-Origin") != "" {
		h.Set("Access-Control-Allow-Methods", allow)
		h.Set("Access-Control-Max-Age", corsMaxAge)
		if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
			h.Set("Access-Control-Allow-Headers", req)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// acceptsBody reports whether r's body is of a type the route takes:
// application/json, or multipart/form-data where upload is set. A
// request with neither a body nor a Content-Type passes (curl -X PUT, a
// DELETE); others have been answered 415.
func acceptsBody(w http.ResponseWriter, r *http.Request, upload bool) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || upload && mt == "multipart/form-data") {
		return true
	}
	want := "application/json"
	if upload {
		want += " or multipart/form-data"
	}
	got := fmt.Sprintf("%q", ct)
	if ct == "" {
		got = "none"
	}
	WriteError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
		fmt.Sprintf("request body must be %s (Content-Type: %s)", want, got))
	return false
}
