package worker

import (
	"context"
	"fmt"
	"testing"

	"github.com/ultimat3/jobs"
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

// overAnswering answers each heartbeat with one code per lease, except the one carrying fewer
// than a whole request's leases, which it answers with `total` codes.
type overAnswering struct {
	frontend.Frontend
	total int
}

func (o *overAnswering) Heartbeat(_ context.Context, req frontend.HeartbeatRequest) (frontend.HeartbeatResponse, error) {
	n := len(req.Leases)
	if n < frontend.MaxHeartbeatLeases {
		n = o.total
	}
	return frontend.HeartbeatResponse{Codes: make([]string, n)}, nil
}

// A part of a split heartbeat answered with the wrong number of codes fails the whole renewal:
// its answer is not taken for the codes of every part, even when its length happens to be the
// whole renewal's (the codes would then land on other claims, renewing or aborting the wrong
// runs).
func TestAMiscountedPartOfASplitHeartbeatRenewsNothing(t *testing.T) {
	t.Parallel()
	n := frontend.MaxHeartbeatLeases + 5
	w := &Worker{fe: &overAnswering{total: n}}
	req := frontend.HeartbeatRequest{WorkerID: "w"}
	for i := range n {
		req.Leases = append(req.Leases, frontend.Lease{RunID: fmt.Sprint(i), Fence: 1})
	}
	resp, err := w.heartbeat(t.Context(), req)
	if err == nil {
		t.Fatalf("a part answered %d codes for 5 leases was taken as the answer (%d codes, no error)", n, len(resp.Codes))
	}
	if !jobs.HasCode(err, jobs.CodeInvariant) {
		t.Fatalf("err = %v, want X_INVARIANT", err)
	}
}
