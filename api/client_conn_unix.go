//go:build unix

package api

import (
	"net"
	"syscall"
)

// alive reports whether a kept connection may be written to: the server has not closed it (nor
// sent anything unasked) while it was idle. One non-blocking peek at the socket, so a connection
// closed by an engine's restart or its idle timeout is dropped before a request is put on it.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true // never wait: the answer is now
	})
	return err == nil && ok
}
