package worker

import (
	"context"
	"fmt"
	"testing"

	"github.com/ultimat3/jobs/frontend"
)

// leaseCounter answers heartbeats and remembers how many leases each carried.
type leaseCounter struct {
	frontend.Frontend
	sizes []int
}

func (c *leaseCounter) Heartbeat(_ context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	c.sizes = append(c.sizes, len(req.Leases))
	codes := make([]string, len(req.Leases))
	for i, l := range req.Leases {
		codes[i] = l.RunID // the answer names the lease it is for, so the order can be checked
	}
	return frontend.HeartbeatResponse{Codes: codes}, nil
}

// A worker holding more claims than one heartbeat may carry renews them in several, each one the
// engine accepts, with the answers in the order of the claims.
func TestAHeartbeatOfManyClaimsIsSplit(t *testing.T) {
	t.Parallel()
	fe := &leaseCounter{}
	w := &Worker{fe: fe}
	n := 2*frontend.MaxHeartbeatLeases + 7
	req := frontend.HeartbeatRequest{WorkerID: "w"}
	for i := range n {
		req.Leases = append(req.Leases, frontend.Lease{RunID: fmt.Sprint(i), Fence: 1})
	}
	resp, err := w.heartbeat(t.Context(), req)
	if err != nil || len(resp.Codes) != n {
		t.Fatalf("%d codes, %v; want %d", len(resp.Codes), err, n)
	}
	for i, c := range resp.Codes {
		if c != fmt.Sprint(i) {
			t.Fatalf("code %d answers lease %s", i, c)
		}
	}
	for _, s := range fe.sizes {
		if s > frontend.MaxHeartbeatLeases {
			t.Fatalf("a heartbeat carried %d leases; at most %d", s, frontend.MaxHeartbeatLeases)
		}
	}
	if len(fe.sizes) != 3 {
		t.Fatalf("%d heartbeats; want 3", len(fe.sizes))
	}
}
