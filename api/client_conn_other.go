//go:build !unix

package api

import "net"

// alive cannot look at the socket here: a connection the server closed fails its next call,
// which the caller's resend rides out.
func alive(net.Conn) bool { return true }
