package api

import (
	"errors"
	"net"
	"syscall"
)

// neverSent reports whether a transport error happened before the request left this process:
// the engine could not be dialled (refused, no route, no such host). Such a call changed
// nothing, so it is X_ENGINE_UNREACHABLE, not the store's X_STORE_UNAVAILABLE nor a record's
// X_COMMIT_UNKNOWN: the caller knows exactly which process to look at.
func neverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED)
}
