package api

import (
	"net/http"
	"sync"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/frontend"
)

// maxBatchRecords bounds the records of one POST /v1/worker/records, so one request's cost on
// the engine stays bounded.
const maxBatchRecords = 256

// RecordsRequest is the body of POST /v1/worker/records: several runs' records in one request.
// A worker process sends the records its runs made while its previous request was in flight, so
// a busy process pays one HTTP round trip for many steps instead of one each.
type RecordsRequest struct {
	Records []frontend.RecordRequest `msgpack:"records"`
}

// RecordsResponse answers POST /v1/worker/records: one result per record, in order.
type RecordsResponse struct {
	Results []RecordResult `msgpack:"results"`
}

// RecordResult is one record's answer: the response, or the refusal POST /v1/worker/record
// would have answered it with.
type RecordResult struct {
	Response frontend.RecordResponse `msgpack:"response"`
	Error    *jobs.Error             `msgpack:"error,omitempty"`
}

// records applies several runs' records. Each is checked and recorded on its own (one refused
// record changes nothing of the others), all at once, so they share the engine's group commit.
func (s *Server) records(w http.ResponseWriter, r *http.Request) error {
	var req RecordsRequest
	if err := readMsgpack(r, &req); err != nil {
		return err
	}
	if len(req.Records) == 0 || len(req.Records) > maxBatchRecords {
		return jobs.Errorf(jobs.CodeBadRequest, "records carries %d records; want 1 to %d", len(req.Records), maxBatchRecords)
	}
	out := RecordsResponse{Results: make([]RecordResult, len(req.Records))}
	var wg sync.WaitGroup
	for i := range req.Records {
		rec := &req.Records[i]
		if err := checkRecord(rec); err != nil {
			out.Results[i].Error = s.refusalOf(r, err)
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, err := s.eng.Record(r.Context(), *rec)
			if err != nil {
				out.Results[i].Error = s.refusalOf(r, err)
				return
			}
			out.Results[i].Response = resp
		}(i)
	}
	wg.Wait()
	return writeMsgpack(w, out)
}
