package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// RunSearch implements store.Searcher.
func (s *Store) RunSearch(ctx context.Context, q store.RunQuery) ([]store.Run, error) {
	query, args := searchSQL(q)
	rows, err := s.readQuery(ctx, query, args...)
	if err != nil {
		return nil, failed("search runs", err)
	}
	out, err := collect(rows, scanRuns)
	if err != nil {
		return nil, failed("search runs", err)
	}
	return out, nil
}

// searchSQL assembles the query of q and its arguments.
func searchSQL(q store.RunQuery) (string, []any) {
	var b strings.Builder
	b.WriteString(sqlSearchHead)
	var args []any
	add := func(present bool, frag, name string, v any) {
		if present {
			b.WriteString(frag)
			args = append(args, sql.Named(name, v))
		}
	}
	add(q.Queue != "", sqlSearchQueue, "queue", q.Queue)
	add(q.State != "", sqlSearchState, "state", string(q.State))
	add(q.Job != "", sqlSearchJob, "job", q.Job)
	add(q.Tenant != "", sqlSearchTenant, "tenant", q.Tenant)
	add(q.Key != "", sqlSearchKey, "key", q.Key)
	add(q.Before != "", sqlSearchBefore, "before", q.Before)
	add(!q.CreatedFrom.IsZero(), sqlSearchCreatedFrom, "created_from", encTime(q.CreatedFrom))
	add(!q.CreatedTo.IsZero(), sqlSearchCreatedTo, "created_to", encTime(q.CreatedTo))
	b.WriteString(sqlSearchTail)
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	args = append(args, sql.Named("limit", limit))
	return b.String(), args
}

// RunFinishedCounts implements store.Searcher.
func (s *Store) RunFinishedCounts(ctx context.Context, since time.Time, width time.Duration) ([]store.FinishedCount, error) {
	if width <= 0 {
		return nil, jobs.Errorf(jobs.CodeBadRequest, "bucket width must be positive, got %s", width)
	}
	rows, err := s.readQuery(ctx, sqlFinishedCounts, nameArgs("since", encTime(since), "width", int64(width))...)
	if err != nil {
		return nil, failed("count finished runs", err)
	}
	out, err := collect(rows, func(rows *sql.Rows) (store.FinishedCount, error) {
		var c store.FinishedCount
		var state string
		err := rows.Scan(&c.Queue, &state, &c.Bucket, &c.Count)
		c.State = store.State(state)
		return c, err
	})
	if err != nil {
		return nil, failed("count finished runs", err)
	}
	store.SortFinishedCounts(out)
	return out, nil
}
