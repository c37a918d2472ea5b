package vaultkv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
)

// Class is what kind of failure an error is; its string is the metrics'
// code label.
type Class string

// The error classes.
const (
	// ClassNotFound: Vault answered 404 with an error (for example no
	// such mount). An absent path is not an error (Secret.Exists).
	ClassNotFound Class = "not_found"
	// ClassCASMismatch: the path's current version is not the cas given
	// (HTTP 400 "check-and-set parameter did not match the current
	// version"); read and plan again.
	ClassCASMismatch Class = "cas_mismatch"
	// ClassForbidden: HTTP 403 or 401 (policy refusal, login refused), after
	// one new login when the token itself was rejected; and HTTP 400 to a
	// login (Kubernetes auth answers 400 "invalid role name" for a role
	// that does not exist).
	ClassForbidden Class = "forbidden"
	// ClassUnavailable: Vault could not be reached or answered (connection
	// refused or reset, timeout, 5xx, sealed, 429), or the client-side rate
	// limit could not be waited for within the context. Transient.
	ClassUnavailable Class = "unavailable"
	// ClassInvalid: any other 4xx, or a request refused before sending (bad
	// path, metadata over Vault's limits, bad configuration).
	ClassInvalid Class = "invalid"
)

// Sentinels, one per Class: errors.Is(err, ErrForbidden) is true for an
// *Error of ClassForbidden, however wrapped. The fake returns them too.
var (
	ErrNotFound    = errors.New("vaultkv: " + string(ClassNotFound))
	ErrCASMismatch = errors.New("vaultkv: " + string(ClassCASMismatch))
	ErrForbidden   = errors.New("vaultkv: " + string(ClassForbidden))
	ErrUnavailable = errors.New("vaultkv: " + string(ClassUnavailable))
	ErrInvalid     = errors.New("vaultkv: " + string(ClassInvalid))
)

var sentinels = map[Class]error{
	ClassNotFound:    ErrNotFound,
	ClassCASMismatch: ErrCASMismatch,
	ClassForbidden:   ErrForbidden,
	ClassUnavailable: ErrUnavailable,
	ClassInvalid:     ErrInvalid,
}

// Error is every error *Client returns.
type Error struct {
	// Op is the operation that failed: OpRead, OpWrite, OpMark, OpDelete,
	// OpGenerate; OpLogin when getting a token (before any of those)
	// failed; "configure" for New.
	Op string
	// Path is the KV path ("<mount>/<rest>"); for OpLogin the login path
	// ("auth/<mount>/login") or the token file; for New the address.
	Path string
	// Class is the kind of failure.
	Class Class
	// Status is the HTTP status Vault answered, 0 when there was no
	// answer or the request was not sent.
	Status int
	// Reason is Vault's message (for example "permission denied"), or the
	// transport's (for example "connect: connection refused"), or why the
	// request was refused before sending. Never a value, token or body.
	Reason string
	// TimedOut is true when no answer came in time (the request's timeout
	// or the caller's deadline): Vault hangs rather than refuses.
	TimedOut bool
}

// IsTimeout says whether err is an *Error that timed out, however wrapped.
func IsTimeout(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.TimedOut
}

// Error renders "vaultkv: <op> <path>: <class> (<status>): <reason>".
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vaultkv: %s %s: %s", e.Op, e.Path, e.Class)
	if e.Status != 0 {
		fmt.Fprintf(&b, " (%d)", e.Status)
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns the sentinel of the error's class (ErrForbidden, ...).
func (e *Error) Unwrap() error { return sentinels[e.Class] }

// ClassOf returns the class of err as a metric label: "ok" for nil, the
// class of a vaultkv error or sentinel, and "unavailable" for anything else
// (a context error, an unknown failure: transient until shown otherwise).
func ClassOf(err error) string {
	if err == nil {
		return "ok"
	}
	var e *Error
	if errors.As(err, &e) {
		return string(e.Class)
	}
	for c, s := range sentinels {
		if errors.Is(err, s) {
			return string(c)
		}
	}
	return string(ClassUnavailable)
}

// casMismatch is the message of Vault's KV v2 engine for a stale cas.
const casMismatch = "check-and-set parameter did not match"

// jsonLimit is in Vault's messages for a request over its JSON limits
// ("JSON string value exceeds allowed length", "... exceeds allowed
// nesting depth").
const jsonLimit = "exceeds allowed"

// classify turns an error of vault/api or of the transport into an *Error.
// It reads only Vault's error messages and the transport's innermost
// error, never a body Vault could not format as errors.
func classify(op, path string, err error) *Error {
	e := &Error{Op: op, Path: path, Class: ClassUnavailable}
	var re *vaultapi.ResponseError
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &re):
		e.Status = re.StatusCode
		e.Reason = responseReason(re)
		e.Class = statusClass(op, re.StatusCode, e.Reason)
	case errors.Is(err, vaultapi.ErrSecretNotFound):
		e.Class, e.Reason = ClassNotFound, "no secret in Vault's response"
	case errors.Is(err, context.DeadlineExceeded):
		e.Reason, e.TimedOut = "timed out: context deadline exceeded", true
	case errors.Is(err, context.Canceled):
		e.Reason = "canceled"
	case errors.As(err, &ue):
		// url.Error's own text repeats the method and URL; keep the cause.
		e.Reason, e.TimedOut = ue.Err.Error(), ue.Timeout()
	case errors.As(err, &ne):
		e.Reason, e.TimedOut = ne.Error(), ne.Timeout()
	default:
		e.Reason = err.Error()
	}
	return e
}

// responseReason joins Vault's error messages. A body that was not Vault's
// JSON error list (RawError) is replaced by the HTTP status text.
func responseReason(re *vaultapi.ResponseError) string {
	if re.RawError || len(re.Errors) == 0 {
		return strings.ToLower(http.StatusText(re.StatusCode))
	}
	var msgs []string
	for _, m := range re.Errors {
		// Vault folds several errors into one multierror text.
		for _, line := range strings.Split(m, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
			if line != "" && !strings.HasSuffix(line, "errors occurred:") && !strings.HasSuffix(line, "error occurred:") {
				msgs = append(msgs, line)
			}
		}
	}
	return strings.Join(msgs, "; ")
}

func statusClass(op string, status int, reason string) Class {
	switch {
	case status == http.StatusBadRequest && strings.Contains(reason, casMismatch):
		return ClassCASMismatch
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return ClassForbidden
	case op == OpLogin && status == http.StatusBadRequest:
		// A login request carries only the role and the JWT: Vault refuses
		// one of those, not a malformed request of ours. Kubernetes auth
		// answers 400 `invalid role name "x"` for a role that does not
		// exist, the most common set-up mistake (product document,
		// "Forbidden": the login role is missing).
		return ClassForbidden
	case status == http.StatusNotFound:
		return ClassNotFound
	case status >= 500 && strings.Contains(reason, jsonLimit):
		// Vault refuses a request over its JSON limits (a value over 1 MiB,
		// too many keys, too deep) with a 500: the same request always
		// fails, so it is no outage.
		return ClassInvalid
	case status == http.StatusTooManyRequests || status >= 500:
		return ClassUnavailable
	default:
		return ClassInvalid
	}
}

// tokenRejected tells a 403 caused by the client token itself (invalid,
// expired or revoked), after which a new login may help, from a policy
// refusal.
func tokenRejected(e *Error) bool {
	return e.Class == ClassForbidden && e.Op != OpLogin && strings.Contains(e.Reason, "invalid token")
}
