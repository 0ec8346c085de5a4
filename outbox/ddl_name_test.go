package outbox

import (
	"strings"
	"testing"
)

// PostgresDDL and SQLiteDDL take the names the store takes, and refuse (panic on) the others:
// the name is spliced into the SQL (quoted).
func TestDDLChecksTheTableName(t *testing.T) {
	for name, fn := range map[string]func(string) string{"PostgresDDL": PostgresDDL, "SQLiteDDL": SQLiteDDL} {
		for _, ok := range []string{"", "my_outbox", "app.my_outbox"} {
			if ddl := fn(ok); !strings.Contains(ddl, "CREATE TABLE") {
				t.Errorf("%s(%q): %q", name, ok, ddl)
			}
		}
		for _, bad := range []string{`jobs_outbox (x int); DROP TABLE users; CREATE TABLE jobs_outbox`, "Outbox", "a b", `"q"`} {
			func() {
				defer func() {
					r := recover()
					if r == nil {
						t.Errorf("%s(%q) did not refuse the name", name, bad)
					} else if !strings.Contains(r.(string), "lower-case identifier") {
						t.Errorf("%s(%q) panicked with %v", name, bad, r)
					}
				}()
				fn(bad)
			}()
		}
	}
}
