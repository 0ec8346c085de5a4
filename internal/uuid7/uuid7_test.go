package uuid7

import (
	"testing"
	"time"
)

// Ids seeded by one seed differ in their time only, are valid version 7 UUIDs that sort by time,
// and no other seed, nor New, makes one that HasSeed takes for them.
func TestSeeded(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	a, b := Seeded(t0, "call:r/kid"), Seeded(t0.Add(time.Hour), "call:r/kid")
	if a == b || a[13:] != b[13:] || !(a < b) {
		t.Fatalf("Seeded: %s then %s", a, b)
	}
	if a[14] != '7' || (a[19] != '8' && a[19] != '9' && a[19] != 'a' && a[19] != 'b') {
		t.Fatalf("%s is not a version 7, RFC 4122 variant UUID", a)
	}
	if !HasSeed(a, "call:r/kid") || !HasSeed(b, "call:r/kid") {
		t.Fatal("HasSeed does not recognise its seed")
	}
	if HasSeed(a, "call:r/kid2") || HasSeed(New(t0), "call:r/kid") || HasSeed("short", "call:r/kid") {
		t.Fatal("HasSeed recognised another seed's, or a random, id")
	}
}
