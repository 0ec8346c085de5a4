package api

import (
	"errors"
	"fmt"

	"github.com/ultimat3/jobs/frontend"
	"github.com/ultimat3/jobs/internal/msgp"
)

// How many items the arrays of the worker protocol's requests may carry. A decoder makes a
// slice to the length an array's header claims before it reads an element, and an element of
// one byte (an empty map) is a whole struct once decoded: a Command is about 300 bytes. Checked
// after the body limit and wire.Shape alone, a 2 MB batch of records whose commands were empty
// maps made an 860 MB heap. So each bound is checked on the array's header, before anything is
// made for it (checkCounts, and the record codec's own read of a record's commands), far above
// what a worker sends and low enough that a request's decoded size stays a small multiple of
// its body: a record carries its step's commands (one for a step; one per parallel step that
// finished while the previous record was in flight), a heartbeat one lease per run its worker
// holds. The records of a batch are bounded by maxBatchRecords (records.go).
const (
	maxRecordCommands  = frontend.MaxRecordCommands
	maxHeartbeatLeases = frontend.MaxHeartbeatLeases
	// maxBatchCommands bounds the commands of all a batch's records together: 256 records of
	// 1,024 empty commands each decoded to about 80 MB, where a batch's records carry a few
	// each. The client's batcher closes a batch before it passes this (client_records.go).
	maxBatchCommands = 4 * maxRecordCommands
)

// checkCounts refuses a worker request whose body's arrays claim more items than the request
// may carry: the records of a batch (and each record's commands), the commands of a record, the
// leases of a heartbeat. It reads the headers only and makes nothing. A struct is read in
// either of msgpack's forms (a map of its fields, or an array of them), and every array among
// its fields is held to the bound, whatever key names it: the request types have one array
// each. A body it cannot read is left to the decoder, which refuses it.
func checkCounts(b []byte, v any) error {
	var bound *arrayBound
	switch v.(type) {
	case *frontend.RecordRequest:
		bound = &recordCommands
	case *RecordsRequest:
		bound = &batchRecords
	case *frontend.HeartbeatRequest:
		bound = &heartbeatLeases
	default:
		return nil
	}
	r := msgp.NewReader(b)
	var totals [1]int
	if err := fieldArrays(&r, 0, bound, &totals); err != nil && !errors.Is(err, msgp.ErrSlowPath) {
		return err
	}
	return nil
}

// arrayBound is the bound of a request's array: at most limit items, each (when each is set) a
// struct whose own arrays are held to each.
type arrayBound struct {
	what, items string
	limit       int
	each        *arrayBound
	// total, when set, bounds the items of every such array in one body together (the commands
	// of a batch's records); counted in the body's totals. Only a batch's commands have one.
	total int
}

var (
	recordCommands  = arrayBound{what: "a record", items: "commands", limit: maxRecordCommands}
	batchCommands   = arrayBound{what: "a record", items: "commands", limit: maxRecordCommands, total: maxBatchCommands}
	batchRecords    = arrayBound{what: "a batch", items: "records", limit: maxBatchRecords, each: &batchCommands}
	heartbeatLeases = arrayBound{what: "a heartbeat", items: "leases", limit: maxHeartbeatLeases}
)

// fieldArrays reads one struct's fields at r (depth: how deep it is) and refuses an array among
// them of more than bound.limit items. It makes nothing: the reader stays on the caller's stack.
func fieldArrays(r *msgp.Reader, depth int, bound *arrayBound, totals *[1]int) error {
	save := *r
	n, err := r.MapLen()
	keyed := err == nil // a map of the fields; else an array of them
	if !keyed {
		*r = save
		if n, err = r.ArrayLen(); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if keyed {
			if err := r.Skip(depth + 1); err != nil { // the key
				return err
			}
		}
		save := *r
		m, err := r.ArrayLen()
		if err != nil || m < 0 {
			*r = save
			if err := r.Skip(depth + 1); err != nil {
				return err
			}
			continue
		}
		if m > bound.limit {
			return fmt.Errorf("%s carries %d %s; the limit is %d", bound.what, m, bound.items, bound.limit)
		}
		if bound.total > 0 {
			if totals[0] += m; totals[0] > bound.total {
				return fmt.Errorf("a batch's records carry more than %d %s in all", bound.total, bound.items)
			}
		}
		for j := 0; j < m; j++ {
			if bound.each != nil {
				err = fieldArrays(r, depth+2, bound.each, totals)
			} else {
				err = r.Skip(depth + 2)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
