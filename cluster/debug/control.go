package debug

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Control actions (POST /debug/control/{action}).
const (
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionSeek    = "seek"
	ActionDrain   = "drain"
	ActionUndrain = "undrain"
	ActionReload  = "reload"
	ActionExit    = "exit"
)

// ControlRequest is the JSON body of POST /debug/control/{action}; Action
// comes from the path.
type ControlRequest struct {
	Action string `json:"-"`
	// Source and Unit name the target of pause, resume and seek: a whole
	// source (Unit empty) or one of its units.
	Source string `json:"source,omitempty"`
	Unit   string `json:"unit,omitempty"`
	// To is seek's target: a position as the unit's positions read,
	// "earliest", "latest", a time (RFC 3339) or "after:<position>".
	To string `json:"to,omitempty"`
	// By is who asks (free text: a user name); Reason why. Both go to the
	// audit table.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ControlReply is the JSON answer of a control that was carried out.
type ControlReply struct {
	Action string `json:"action"`
	Node   string `json:"node"`
	// Detail says what was done, for a person.
	Detail string `json:"detail"`
	// Result is action-specific (the control row written, the reload's
	// difference); omitted when there is nothing more to say.
	Result any `json:"result,omitempty"`
}

// Controller carries out the controls. Control returns an error wrapping
// ErrBadControl for a request that names something wrong (answered 400
// with the error), ErrControlConflict for one that cannot be done in the
// node's state (409); any other error is answered 500.
type Controller interface {
	Control(ctx context.Context, req ControlRequest) (ControlReply, error)
}

var (
	// ErrBadControl marks a control request that is wrong as asked.
	ErrBadControl = errors.New("bad control request")
	// ErrControlConflict marks a control the node cannot carry out now.
	ErrControlConflict = errors.New("control conflicts with the node's state")
	// ErrControlIncomplete marks a control that was carried out in part
	// (a reload that failed half-way): the reply returned with it says
	// what was done and what not. It is answered 500 with that reply as
	// JSON.
	ErrControlIncomplete = errors.New("control carried out in part")
)

// maxControlBody bounds a control request's body; maxControlBy and
// maxControlReason its who and why (they go to the audit table and every
// node's event log).
const (
	maxControlBody   = 64 << 10
	maxControlBy     = 256
	maxControlReason = 1 << 10
)

// control serves POST /debug/control/{action}. Besides the token (see
// adminAuthorized) it takes only a JSON body (Content-Type
// application/json, which a cross-site form cannot send without a CORS
// preflight this endpoint never answers) and refuses a request whose
// Origin is another site's.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	if !s.adminAuthorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="drover control"`)
		text(w, http.StatusUnauthorized, `unauthorized: controls need the admin token (node.admin_token, or node.debug_token when no admin token is set) as "Authorization: Bearer <token>"`)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		text(w, http.StatusForbidden, "forbidden: a control must come from this endpoint's own page or a client without an Origin header")
		return
	}
	// Without a token anyone who reaches the endpoint may control: only
	// clients of this machine, by its loopback name. A page of another
	// site whose name was rebound to 127.0.0.1 sends its own name as
	// Host (and Origin), which sameOrigin cannot tell from ours.
	if s.cfg.Token == "" && s.cfg.AdminToken == "" && !loopbackHost(r.Host) {
		text(w, http.StatusForbidden, "forbidden: an endpoint without a token takes controls only for a loopback host name (127.0.0.1, [::1], localhost); set node.admin_token to control it under another name")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		text(w, http.StatusUnsupportedMediaType, "a control's body must be JSON (Content-Type: application/json)")
		return
	}
	if s.cfg.Controller == nil {
		text(w, http.StatusNotImplemented, "this node takes no controls")
		return
	}
	var req ControlRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	switch {
	case err != nil:
		text(w, http.StatusBadRequest, fmt.Sprintf("control body: %v", err))
		return
	case len(body) > maxControlBody:
		text(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("control body: larger than %d bytes", maxControlBody))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		text(w, http.StatusBadRequest, fmt.Sprintf("control body: %v", err))
		return
	}
	if dec.More() {
		text(w, http.StatusBadRequest, "control body: more than one JSON value")
		return
	}
	if len(req.By) > maxControlBy || len(req.Reason) > maxControlReason {
		text(w, http.StatusBadRequest, fmt.Sprintf("control body: by is at most %d bytes, reason at most %d", maxControlBy, maxControlReason))
		return
	}
	req.Action = r.PathValue("action")
	// A control may outlast WriteTimeout (a reload hands units over):
	// its answer gets ControlTimeout from now instead of being lost.
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.ControlTimeout)); err != nil {
		s.cfg.Logger.Warn("debug endpoint: extend a control's write deadline", "action", req.Action, "err", err)
	}
	rep, err := s.cfg.Controller.Control(r.Context(), req)
	switch {
	case errors.Is(err, ErrControlIncomplete):
		s.cfg.Logger.Warn("debug endpoint: control carried out in part", "action", req.Action, "err", err)
		b, jerr := json.Marshal(rep)
		s.writeJSONStatus(w, http.StatusInternalServerError, "control reply", b, jerr)
		return
	case errors.Is(err, ErrBadControl):
		text(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, ErrControlConflict):
		text(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		s.cfg.Logger.Warn("debug endpoint: control failed", "action", req.Action, "err", err)
		text(w, http.StatusInternalServerError, err.Error())
		return
	}
	b, err := json.Marshal(rep)
	s.writeJSON(w, "control reply", b, err)
}

// adminAuthorized is auth for the controls: the admin token when one is
// set, otherwise the read token; with neither (a loopback endpoint without
// tokens) every caller.
func (s *Server) adminAuthorized(r *http.Request) bool {
	if s.cfg.AdminToken == "" {
		return s.cfg.Token == "" || s.authorized(r)
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.adminSum[:]) == 1
}

// loopbackHost reports whether a Host header names a loopback address
// or localhost, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return isLoopback(strings.Trim(host, "[]"))
}

// sameOrigin reports whether the Origin header origin names host (the
// request's Host), whatever the scheme.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}
