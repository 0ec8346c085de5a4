package api

import (
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// A nil where a time belongs makes msgpack's decoder panic. Whichever side reads such a body,
// the engine reading a request or a worker reading an answer, it is an error with a code.
func TestMalformedTimeIsAnErrorOnBothSides(t *testing.T) {
	// {"tasks": [{"lease_until": nil}]}: a poll answer whose task's lease end is nil.
	poll := []byte{0x81, 0xa5, 't', 'a', 's', 'k', 's', 0x91, 0x81, 0xab,
		'l', 'e', 'a', 's', 'e', '_', 'u', 'n', 't', 'i', 'l', 0xc0}
	var tasks frontend.Task
	// The bare task, as a request body would carry a time.
	task := poll[8:]
	if err := decodeMsgpack(task, &tasks); err != nil && !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Fatalf("engine side: %v, want X_BAD_REQUEST or nil", err)
	}
	var got PollResponse
	err := decodeAs(response{contentType: ContentMsgpack, body: poll}, &got)
	if err != nil && !jobs.HasCode(err, jobs.CodeEncoding) {
		t.Fatalf("worker side: %v, want X_ENCODING or nil", err)
	}
}
