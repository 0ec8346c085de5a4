package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// RunSearch implements store.Searcher.
func (s *Store) RunSearch(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	query, args := s.searchSQL(q)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, unavailable("run search", err)
	}
	byID := map[string]*store.Run{}
	var order []string
	if err := collectRuns(rows, byID, &order); err != nil {
		return nil, unavailable("run search", err)
	}
	out := make([]store.Run, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

// searchSQL assembles the query of q (rendered for the store's schema) and its arguments; see
// sql_search.go for its shapes.
func (s *Store) searchSQL(q store.RunQuery) (string, []any) {
	var where strings.Builder
	var args []any
	add := func(present bool, frag string, v any) {
		if present {
			args = append(args, v)
			fmt.Fprintf(&where, frag, len(args))
		}
	}
	add(q.Queue != "", sqlSearchQueue, q.Queue)
	add(q.Job != "", sqlSearchJob, q.Job)
	add(q.Tenant != "", sqlSearchTenant, q.Tenant)
	add(q.Key != "", sqlSearchKey, q.Key)
	add(q.Before != "", sqlSearchBefore, q.Before)
	add(!q.CreatedFrom.IsZero(), sqlSearchCreatedFrom, q.CreatedFrom)
	add(!q.CreatedTo.IsZero(), sqlSearchCreatedTo, q.CreatedTo)
	filters := where.String()
	var b strings.Builder
	switch {
	case q.State == store.StateRunning:
		args = append(args, limitArg(q.Limit))
		fmt.Fprintf(&b, sqlSearchRunningCTE, filters)
		b.WriteString(sqlSearchApart)
		fmt.Fprintf(&b, sqlSearchTail, len(args))
	case q.Key != "" && q.State.Live():
		args = append(args, string(q.State), limitArg(q.Limit))
		fmt.Fprintf(&b, sqlSearchLiveCTE, filters)
		b.WriteString(sqlSearchApart + " WHERE true")
		fmt.Fprintf(&b, sqlSearchState+sqlSearchTail, len(args)-1, len(args))
	case q.State != "":
		args = append(args, string(q.State), limitArg(q.Limit))
		b.WriteString(sqlSearchHead + sqlSearchNotRunning + filters)
		if q.Key != "" {
			b.WriteString(sqlSearchNotLive)
		}
		fmt.Fprintf(&b, sqlSearchState+sqlSearchTail, len(args)-1, len(args))
	case q.Key != "":
		args = append(args, limitArg(q.Limit))
		fmt.Fprintf(&b, sqlSearchLiveCTE, filters)
		fmt.Fprintf(&b, sqlSearchMerge, sqlSearchHead+sqlSearchNotLive+filters, len(args))
	case q.Queue != "" || q.Job != "":
		args = append(args, limitArg(q.Limit))
		fmt.Fprintf(&b, sqlSearchRunningCTE, filters)
		fmt.Fprintf(&b, sqlSearchMerge, sqlSearchHead+sqlSearchNotRunning+filters, len(args))
	default:
		args = append(args, limitArg(q.Limit))
		b.WriteString(sqlSearchHead + filters)
		fmt.Fprintf(&b, sqlSearchTail, len(args))
	}
	return schemaReplacer(s.schema).Replace(b.String()), args
}

// RunFinishedCounts implements store.Searcher.
func (s *Store) RunFinishedCounts(ctx context.Context, since time.Time, width time.Duration) ([]store.FinishedCount, error) {
	if width < time.Microsecond {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "bucket width must be at least 1µs, got %s", width)
	}
	rows, err := s.pool.Query(ctx, schemaReplacer(s.schema).Replace(sqlFinishedCounts), since, width.Microseconds())
	if err != nil {
		return nil, unavailable("count finished runs", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.FinishedCount, error) {
		var c store.FinishedCount
		var state string
		var bucket, count int64
		err := row.Scan(&c.Queue, &state, &bucket, &count)
		c.State, c.Bucket, c.Count = store.State(state), int(bucket), int(count)
		return c, err
	})
	if err != nil {
		return nil, unavailable("count finished runs", err)
	}
	store.SortFinishedCounts(out)
	return out, nil
}
