package paging

import (
	"strings"
	"testing"

	"github.com/ultimat3/jobs"
)

func TestCursor(t *testing.T) {
	t.Parallel()
	const id = "019b8d62-7a80-7918-804a-a8d0c31880b3"
	for _, ok := range []string{"", id, "00000000-0000-7000-8000-000000000000"} {
		if err := Cursor(ok); err != nil {
			t.Errorf("Cursor(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"garbage", "zz", strings.ToUpper(id), id[:35], id + "0", strings.ReplaceAll(id, "-", "_"),
		"019b8d62-7a80-7918-804a-a8d0c31880bg", "019b8d627a8079-18-804a-a8d0c31880b3", strings.Repeat("x", 2000)} {
		err := Cursor(bad)
		if jobs.CodeOf(err) != jobs.CodeBadRequest || len(err.Error()) > 300 {
			t.Errorf("Cursor(%.40q) = %v; want a short X_BAD_REQUEST", bad, err)
		}
	}
}

func TestLimit(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": Default, "1": 1, "500": 500} {
		if n, err := Limit(s, Default, Max); err != nil || n != want {
			t.Errorf("Limit(%q) = %d, %v; want %d", s, n, err, want)
		}
	}
	for _, s := range []string{"0", "-1", "501", "x", "1.5", " 1", "99999999999999999999"} {
		if _, err := Limit(s, Default, Max); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("Limit(%q) = %v; want X_BAD_REQUEST", s, err)
		}
	}
	one, zero, over := 1, 0, MaxBackfills+1
	if n, err := LimitOf(nil, 0, MaxBackfills); err != nil || n != 0 {
		t.Errorf("LimitOf(nil) = %d, %v; want the default", n, err)
	}
	if n, err := LimitOf(&one, 0, MaxBackfills); err != nil || n != 1 {
		t.Errorf("LimitOf(1) = %d, %v", n, err)
	}
	for _, n := range []*int{&zero, &over} {
		if _, err := LimitOf(n, 0, MaxBackfills); jobs.CodeOf(err) != jobs.CodeBadRequest {
			t.Errorf("LimitOf(%d) = %v; want X_BAD_REQUEST", *n, err)
		}
	}
}
