package engine

import "strings"

// traceID is the trace-id field of a W3C traceparent ("00-<trace-id>-<parent-id>-<flags>"), or
// "" when there is none. The store holds only traceparents the engine validated or produced.
func traceID(parent string) string {
	f := strings.Split(parent, "-")
	if len(f) < 4 {
		return ""
	}
	return f[1]
}
