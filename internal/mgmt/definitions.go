package mgmt

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/warrenmq/broker/definitions"
)

// definitionRoutes: the definitions export and import, the
// administrator's.
func (m *mgmt) definitionRoutes() {
	m.handle("GET", "/api/definitions", administrator, m.definitions)
	m.handleUpload("POST", "/api/definitions", administrator, m.postDefinitions)
}

func (m *mgmt) definitions(c *mgmtCall) {
	d, err := m.b.Export(c.r.Context())
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	writeJSON(c.w, http.StatusOK, d)
}

func (m *mgmt) postDefinitions(c *mgmtCall) {
	var d definitions.File
	if !readDefinitions(c, &d) {
		return
	}
	if err := m.b.Import(c.r.Context(), &d); err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// readDefinitions decodes the definitions a POST carries: the body
// itself, or, in a multipart/form-data upload (RabbitMQ's UI, curl -F
// file=@defs.json), the part named "file", as RabbitMQ's
// rabbit_mgmt_wm_definitions reads it. Other parts are skipped
// (RabbitMQ's "redirect" among them: the answer is 204, not a redirect).
// The whole body is bounded by mgmtMaxDefinitionsBody.
func readDefinitions(c *mgmtCall, d *definitions.File) bool {
	if mt, _, _ := mime.ParseMediaType(c.r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		return readBodyMax(c, d, mgmtMaxDefinitionsBody)
	}
	c.r.Body = http.MaxBytesReader(c.w, c.r.Body, mgmtMaxDefinitionsBody)
	mr, err := c.r.MultipartReader()
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "multipart upload: "+err.Error())
		return false
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			WriteError(c.w, http.StatusBadRequest, "bad_request", `multipart upload without a "file" part`)
			return false
		}
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			WriteError(c.w, http.StatusRequestEntityTooLarge, "bad_request", fmt.Sprintf("request body larger than %d bytes", mgmtMaxDefinitionsBody))
			return false
		}
		if err != nil {
			WriteError(c.w, http.StatusBadRequest, "bad_request", "multipart upload: "+err.Error())
			return false
		}
		if part.FormName() == "file" {
			return decodeBody(c, part, d, mgmtMaxDefinitionsBody)
		}
	}
}
