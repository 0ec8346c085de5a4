package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/store"
)

// Reconnect backoff of the listener. Real time on purpose: it paces reconnects to a database,
// and no test of the engine's logic waits on it (the engine polls besides).
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Subscribe LISTENs on the store's two channels on a connection of its own (a LISTEN holds its
// connection for as long as it listens, which a pooled connection must not) and delivers what
// arrives until ctx ends or the store closes; then the channel is closed.
//
// A lost connection is re-established with backoff. Notifications sent while it was down are
// lost, so after a reconnect a Signal{Timer: true} is delivered (timer services re-read their
// next due time); ready queues are found again by the pollers' fallback polling, as the
// contract says notifications are best-effort. The first connection's failure is returned.
func (s *Store) Subscribe(ctx context.Context) (<-chan store.Signal, error) {
	conn, err := s.listenConn(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		closeQuietly(conn)
		return nil, jobs.Errorf(jobs.CodeStoreUnavailable, "postgres subscribe: the store is closed")
	}
	ch := make(chan store.Signal, 64)
	s.wg.Add(1)
	go s.listen(ctx, conn, ch)
	return ch, nil
}

func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg)
	if err != nil {
		return nil, jobs.Wrap(jobs.CodeStoreUnavailable, err, "postgres subscribe: connect")
	}
	for _, n := range []stmt{stmtListenReady, stmtListenTimer} {
		if _, err := conn.Exec(ctx, s.q(n)); err != nil {
			closeQuietly(conn)
			return nil, jobs.Wrap(jobs.CodeStoreUnavailable, err, "postgres subscribe: listen")
		}
	}
	return conn, nil
}

func (s *Store) listen(ctx context.Context, conn *pgx.Conn, ch chan<- store.Signal) {
	defer s.wg.Done()
	defer close(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel) // Close ends every listener
	defer stop()
	defer func() {
		if conn != nil {
			closeQuietly(conn)
		}
	}()

	send := func(sig store.Signal) bool {
		select {
		case ch <- sig:
			return true
		case <-ctx.Done():
			return false
		}
	}
	backoff := listenBackoffMin
	for {
		if conn == nil {
			c, err := s.listenConn(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("postgres: notification listener cannot reconnect", "err", err, "retry_in", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				}
				backoff = min(2*backoff, listenBackoffMax)
				continue
			}
			conn, backoff = c, listenBackoffMin
			s.log.Info("postgres: notification listener reconnected")
			if !send(store.Signal{Timer: true}) {
				return
			}
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			closeQuietly(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("postgres: notification listener lost its connection", "err", err)
			continue
		}
		var sig store.Signal
		switch n.Channel {
		case s.chReady:
			sig.Queue, sig.Fresh = strings.CutPrefix(n.Payload, freshMark)
		case s.chTimer:
			sig.Timer = true
		default:
			continue
		}
		if !send(sig) {
			return
		}
	}
}

func closeQuietly(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
