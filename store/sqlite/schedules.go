package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/ultimat3/jobs/store"
)

// LeaderAcquire implements store.Schedules. The one write connection serialises acquirers of
// this file; across processes SQLite's write lock does.
func (s *Store) LeaderAcquire(ctx context.Context, p store.LeaderParams) (store.Leader, error) {
	l := store.Leader{Role: p.Role}
	err := s.write(ctx, "acquire leader", func(t *wtx) error {
		if _, err := t.exec(sqlLeaderAcquire, p.Role, p.Holder, encTime(p.Until), encTime(p.Now)); err != nil {
			return err
		}
		var until int64
		if err := t.queryRow(sqlLeaderGet, p.Role).Scan(&l.Holder, &until); err != nil {
			return err
		}
		l.Until = decTime(until)
		return nil
	})
	if err != nil {
		return store.Leader{}, err
	}
	return l, nil
}

// LeaderRelease implements store.Schedules.
func (s *Store) LeaderRelease(ctx context.Context, role, holder string) error {
	return s.write(ctx, "release leader", func(t *wtx) error {
		_, err := t.exec(sqlLeaderRelease, role, holder)
		return err
	})
}

func scanSchedule(sc interface{ Scan(...any) error }) (store.ScheduleState, error) {
	var st store.ScheduleState
	var watermark, lastFire, updated, paused int64
	if err := sc.Scan(&st.Name, &watermark, &lastFire, &st.LastRunID, &st.Missed, &paused, &updated); err != nil {
		return store.ScheduleState{}, err
	}
	st.Watermark, st.LastFire, st.UpdatedAt = decTime(watermark), decTime(lastFire), decTime(updated)
	st.Paused = paused != 0
	return st, nil
}

// getSchedule reads a schedule's state in a write transaction; ok is false when it has none.
func (t *wtx) getSchedule(name string) (store.ScheduleState, bool, error) {
	st, err := scanSchedule(t.queryRow(sqlScheduleGet, name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.ScheduleState{}, false, nil
	}
	return st, err == nil, err
}

func (t *wtx) saveSchedule(st store.ScheduleState) error {
	_, err := t.exec(sqlScheduleSave, encTime(st.Watermark), encTime(st.LastFire), st.LastRunID, st.Missed,
		st.Paused, encTime(st.UpdatedAt), st.Name)
	return err
}

// ScheduleInit implements store.Schedules.
func (s *Store) ScheduleInit(ctx context.Context, names []string, watermark time.Time) ([]store.ScheduleState, error) {
	out := make([]store.ScheduleState, len(names))
	err := s.write(ctx, "init schedules", func(t *wtx) error {
		for i, n := range names {
			if _, err := t.exec(sqlScheduleInsert, n, encTime(watermark), encTime(time.Time{}), encTime(watermark)); err != nil {
				return err
			}
			st, _, err := t.getSchedule(n)
			if err != nil {
				return err
			}
			out[i] = st
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleList implements store.Schedules.
func (s *Store) ScheduleList(ctx context.Context) ([]store.ScheduleState, error) {
	rows, err := s.readQuery(ctx, sqlScheduleList)
	if err != nil {
		return nil, failed("list schedules", err)
	}
	out, err := collect(rows, func(r *sql.Rows) (store.ScheduleState, error) { return scanSchedule(r) })
	if err != nil {
		return nil, failed("list schedules", err)
	}
	return out, nil
}

// ScheduleFire implements store.Schedules: the lease check, the creates and the watermark share
// one write transaction.
func (s *Store) ScheduleFire(ctx context.Context, p store.ScheduleFireParams) ([]store.CreateRunResult, error) {
	var out []store.CreateRunResult
	err := s.write(ctx, "fire schedule", func(t *wtx) error {
		l := store.Leader{Role: p.Role}
		var until int64
		err := t.queryRow(sqlLeaderGet, p.Role).Scan(&l.Holder, &until)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		l.Until = decTime(until)
		st, ok, err2 := t.getSchedule(p.Name)
		if err2 != nil {
			return err2
		}
		if err := store.CheckFire(p, l, err == nil, st, ok); err != nil {
			return err
		}
		out = make([]store.CreateRunResult, len(p.Runs))
		if err := t.createRuns(p.Runs, out); err != nil {
			return err
		}
		return t.saveSchedule(store.Fired(st, p, out))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SchedulePause implements store.Schedules.
func (s *Store) SchedulePause(ctx context.Context, name string, paused bool, watermark, now time.Time) (store.ScheduleState, error) {
	var st store.ScheduleState
	err := s.write(ctx, "pause schedule", func(t *wtx) error {
		cur, ok, err := t.getSchedule(name)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrScheduleNotFound(name)
		}
		st = store.Paused(cur, paused, watermark, now)
		return t.saveSchedule(st)
	})
	if err != nil {
		return store.ScheduleState{}, err
	}
	return st, nil
}
