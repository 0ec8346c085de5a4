package jobs

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Error is every refusal the engine makes: a stable Code, a message for people, and, for
// retry-after codes, the delay the responder named. Match with errors.As or HasCode.
type Error struct {
	Code    Code   `json:"code" msgpack:"code"`
	Message string `json:"message" msgpack:"message"`
	// RetryAfter is the delay the responder named, read for codes of class RetryAfter.
	RetryAfter time.Duration `json:"retryAfter,omitempty" msgpack:"retry_after,omitempty"`
	cause      error
}

// Errorf returns an *Error with code c.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with code c whose cause is err.
func Wrap(c Code, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if err != nil {
		msg += ": " + err.Error()
	}
	return &Error{Code: c, Message: msg, cause: err}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.cause }

// Is makes errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}

// CodeOf returns the code of the first *Error in err's chain, or "" for a plain error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// HasCode reports whether err carries code c.
func HasCode(err error, c Code) bool { return err != nil && CodeOf(err) == c }

var (
	classMu sync.RWMutex
	// classes holds app registrations; engine codes are read from the code table.
	classes = map[Code]RetryClass{}
)

// RegisterErrorRetry classifies an app's codes. Call it beside the code that declares the
// errors (a package-level var or init), so importing that package is the registration:
//
//	var _ = jobs.RegisterErrorRetry(map[jobs.Code]jobs.RetryClass{
//		"X_INVOICE_REJECTED": jobs.Terminal,
//		"X_GATEWAY_BUSY":     jobs.RetryAfter,
//	})
//
// It returns true so it can initialise a blank variable.
func RegisterErrorRetry(m map[Code]RetryClass) bool {
	classMu.Lock()
	defer classMu.Unlock()
	for c, k := range m {
		classes[c] = k
	}
	return true
}

// ClassOf returns how the queue treats an attempt that failed with code c.
func ClassOf(c Code) RetryClass {
	classMu.RLock()
	k, ok := classes[c]
	classMu.RUnlock()
	if ok {
		return k
	}
	for _, row := range codeTable {
		if row.Code == c {
			return row.Class
		}
	}
	return Unclassified
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
