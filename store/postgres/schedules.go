package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ultimat3/jobs/store"
)

// LeaderAcquire implements store.Schedules: an upsert that takes the row only when it is free,
// lapsed or ours, then a read of the holder, in one transaction and one round trip.
func (s *Store) LeaderAcquire(ctx context.Context, p store.LeaderParams) (store.Leader, error) {
	t, err := s.begin(ctx, "leader acquire")
	if err != nil {
		return store.Leader{}, err
	}
	defer t.release()
	l := store.Leader{Role: p.Role}
	b := t.batch()
	b.Queue(s.qs(stmtLeaderAcquire), p.Role, p.Holder, p.Until, p.Now)
	b.Queue(s.qs(stmtLeaderGet), p.Role).QueryRow(func(row pgx.Row) error {
		return row.Scan(&l.Holder, &l.Until)
	})
	if err := t.commit(ctx, b); err != nil {
		return store.Leader{}, err
	}
	l.Until = l.Until.UTC()
	return l, nil
}

// LeaderRelease implements store.Schedules.
func (s *Store) LeaderRelease(ctx context.Context, role, holder string) error {
	if _, err := s.pool.Exec(ctx, s.qs(stmtLeaderRelease), role, holder); err != nil {
		return unavailable("leader release", err)
	}
	return nil
}

func scanSchedule(row pgx.Row) (store.ScheduleState, error) {
	var st store.ScheduleState
	var lastFire pgtype.Timestamptz
	if err := row.Scan(&st.Name, &st.Watermark, &lastFire, &st.LastRunID, &st.Missed, &st.Paused, &st.UpdatedAt); err != nil {
		return store.ScheduleState{}, err
	}
	st.Watermark, st.UpdatedAt, st.LastFire = st.Watermark.UTC(), st.UpdatedAt.UTC(), fromTS(lastFire)
	return st, nil
}

func (s *Store) queueSaveSchedule(b *pgx.Batch, st store.ScheduleState) {
	b.Queue(s.qs(stmtScheduleSave), st.Name, st.Watermark, ts(st.LastFire), st.LastRunID, st.Missed, st.Paused, st.UpdatedAt)
}

// ScheduleInit implements store.Schedules.
func (s *Store) ScheduleInit(ctx context.Context, names []string, watermark time.Time) ([]store.ScheduleState, error) {
	t, err := s.begin(ctx, "schedule init")
	if err != nil {
		return nil, err
	}
	defer t.release()
	byName := map[string]store.ScheduleState{}
	b := t.batch()
	b.Queue(s.qs(stmtScheduleInsert), strs(names), watermark)
	b.Queue(s.qs(stmtScheduleGet), strs(names)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			st, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			byName[st.Name] = st
		}
		return rows.Err()
	})
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	out := make([]store.ScheduleState, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out, nil
}

// ScheduleList implements store.Schedules.
func (s *Store) ScheduleList(ctx context.Context) ([]store.ScheduleState, error) {
	rows, err := s.pool.Query(ctx, s.qs(stmtScheduleList))
	if err != nil {
		return nil, unavailable("schedule list", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ScheduleState, error) { return scanSchedule(r) })
	if err != nil {
		return nil, unavailable("schedule list", err)
	}
	return out, nil
}

// ScheduleFire implements store.Schedules. The lease row and the schedule's row are read FOR
// UPDATE (in that order, everywhere), so a takeover of the lease or another leader's fire of the
// same schedule waits for this transaction and then sees its outcome; the runs are created by
// RunCreate's own statements in the same transaction.
func (s *Store) ScheduleFire(ctx context.Context, p store.ScheduleFireParams) ([]store.CreateRunResult, error) {
	t, err := s.begin(ctx, "schedule fire")
	if err != nil {
		return nil, err
	}
	defer t.release()
	l := store.Leader{Role: p.Role}
	var st store.ScheduleState
	var lok, sok bool
	b := t.batch()
	b.Queue(s.qs(stmtLeaderGet), p.Role).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&l.Holder, &l.Until)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		lok = err == nil
		return err
	})
	b.Queue(s.qs(stmtScheduleLock), p.Name).QueryRow(func(row pgx.Row) error {
		var err error
		st, err = scanSchedule(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		sok = err == nil
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	if err := store.CheckFire(p, l, lok, st, sok); err != nil {
		return nil, err
	}
	out, b, err := s.createRuns(ctx, t, p.Runs)
	if err != nil {
		return nil, err
	}
	s.queueSaveSchedule(b, store.Fired(st, p, out))
	if err := t.commit(ctx, b); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Run = cloneRun(out[i].Run)
	}
	return out, nil
}

// SchedulePause implements store.Schedules.
func (s *Store) SchedulePause(ctx context.Context, name string, paused bool, watermark, now time.Time) (store.ScheduleState, error) {
	t, err := s.begin(ctx, "schedule pause")
	if err != nil {
		return store.ScheduleState{}, err
	}
	defer t.release()
	var st store.ScheduleState
	var ok bool
	b := t.batch()
	b.Queue(s.qs(stmtScheduleLock), name).QueryRow(func(row pgx.Row) error {
		var err error
		st, err = scanSchedule(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		ok = err == nil
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return store.ScheduleState{}, err
	}
	if !ok {
		return store.ScheduleState{}, store.ErrScheduleNotFound(name)
	}
	st = store.Paused(st, paused, watermark, now)
	b = t.batch()
	s.queueSaveSchedule(b, st)
	if err := t.commit(ctx, b); err != nil {
		return store.ScheduleState{}, err
	}
	return st, nil
}
