package sqlite

import (
	"strings"
	"testing"
)

// Each statement of the fair claim seeks runs_lanes and reads it in order: a lane's head and the
// next tenant cost one index seek whatever the backlog.
func TestFairClaimUsesTheLanesIndex(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	for name, c := range map[string]struct {
		query string
		args  []any
	}{
		"first lane": {sqlLaneFirst, nameArgs("queue", "q")},
		"next lane":  {sqlLaneNext, nameArgs("queue", "q", "after", "a")},
		"lane head": {sqlLaneHead, nameArgs("queue", "q", "tenant", "a", "workers", `["w"]`,
			"sticky_before", int64(0), "after_at", int64(0), "after_id", "x", "limit", 10)},
	} {
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		if strings.Contains(text, "TEMP B-TREE") || !strings.Contains(text, "runs_lanes") {
			t.Errorf("%s: plan %q sorts or does not read runs_lanes", name, text)
		}
		// A top-up goes on where the lane's first take stopped: a seek, not a walk from its head.
		if c.query == sqlLaneHead && !strings.Contains(text, "tenant=? AND <expr>>?") {
			t.Errorf("%s: plan %q does not seek past the claim time it is given", name, text)
		}
	}
}
