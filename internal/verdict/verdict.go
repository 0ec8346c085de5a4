// Package verdict writes the clause a failed attempt's error ends with when the attempt stops
// its run: "(stopped at attempt 1 of 5: X_BAD_REQUEST is terminal)" or "(attempt 5 of 5:
// attempts exhausted)". It is one place because three writers add it (the worker, the engine
// when it enforces the declared attempts, the engine's last-error text) and each must not add it
// to a message that already carries one: an error that crossed a run boundary (a child's
// failure failing its parent) or was re-annotated would otherwise say "terminal" twice.
package verdict

import (
	"fmt"
	"regexp"
)

// clause matches a verdict this package wrote, at the end of a message.
var clause = regexp.MustCompile(` \((stopped at attempt \d+ of \d+: [^()]* is terminal|attempt \d+ [^()]*: attempts exhausted)\)$`)

// Strip removes a trailing verdict clause, if msg ends with one.
func Strip(msg string) string { return clause.ReplaceAllString(msg, "") }

// Terminal is msg ending with the verdict of a terminal stop at attempt of max, code being what
// made it terminal (empty: a plain error).
func Terminal(msg string, attempt, maxAttempts int, code string) string {
	if code == "" {
		code = "a plain error"
	}
	return fmt.Sprintf("%s (stopped at attempt %d of %d: %s is terminal)", Strip(msg), attempt, maxAttempts, code)
}

// Exhausted is msg ending with the verdict of a run whose attempts ran out. An attempt past the
// policy's count is one an operator's retry granted (store.RetriedAttempt), and says so rather
// than print "attempt 6 of 5".
func Exhausted(msg string, attempt, maxAttempts int) string {
	if attempt > maxAttempts {
		return fmt.Sprintf("%s (attempt %d, granted by a retry past the policy's %d: attempts exhausted)", Strip(msg), attempt, maxAttempts)
	}
	return fmt.Sprintf("%s (attempt %d of %d: attempts exhausted)", Strip(msg), attempt, maxAttempts)
}

// Exhausting reports whether msg already ends with an exhausted verdict.
func Exhausting(msg string) bool {
	m := clause.FindStringSubmatch(msg)
	return m != nil && m[1] != "" && m[1][0] == 'a'
}
