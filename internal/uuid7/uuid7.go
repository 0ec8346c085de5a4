// Package uuid7 makes time-ordered identifiers (RFC 9562 version 7), so run ids sort by creation
// and index well as primary keys.
package uuid7

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// New returns a version 7 UUID in its canonical text form, for the given time.
func New(t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint64(b[0:8], ms<<16)
	_, _ = rand.Read(b[6:])
	return format(&b)
}

// Seeded returns a version 7 UUID for the given time whose 74 random bits are drawn from seed
// instead: ids made from one seed differ in their time only, so HasSeed can tell, from the id
// alone, that it was made from a seed (a durable call's own id) that no caller can choose.
func Seeded(t time.Time, seed string) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint64(b[0:8], ms<<16)
	h := sha256.Sum256([]byte(seed))
	copy(b[6:], h[:10])
	return format(&b)
}

// HasSeed reports whether id is Seeded(t, seed) for some time t.
func HasSeed(id, seed string) bool {
	want := Seeded(time.UnixMilli(0), seed)
	// The time is the first 12 hex digits and the dash after them; the version digit follows.
	return len(id) == 36 && id[13:] == want[13:]
}

func format(b *[16]byte) string {
	b[6] = (b[6] & 0x0f) | 0x70 // version 7
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// Len is the length of a UUID's text form.
const Len = 36

// IsText reports whether s is a UUID's text form, 8-4-4-4-12 hex digits: lowercase only, as New
// writes it, or with upper also A-F. It checks the form, not a version.
func IsText(s string, upper bool) bool {
	if len(s) != Len {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || upper && 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
