package jobs_test

import (
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
)

// A request with several bad fields is refused for the same field every time (they are checked
// in a fixed order), so a caller sees one stable error for one request.
func TestEnqueueRequestValidateIsDeterministic(t *testing.T) {
	bad := string([]byte{0xff})
	req := jobs.EnqueueRequest{Job: "j", Queue: "q" + bad, Key: "k" + bad, Tenant: "t" + bad, NoTenant: false}
	for range 64 {
		err := req.Validate()
		if jobs.CodeOf(err) != jobs.CodeBadRequest || !strings.Contains(err.Error(), "queue is not valid UTF-8") {
			t.Fatalf("Validate: %v; want the queue, the first bad field, named", err)
		}
	}
}
