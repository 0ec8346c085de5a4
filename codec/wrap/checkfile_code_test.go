package wrap_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ultimat3/jobs"
	"github.com/ultimat3/jobs/codec"
	"github.com/ultimat3/jobs/codec/wrap"
)

// wrap.CheckFile answers a file that is not a dump as replay.CheckFile does, with a code: a path
// that does not open is X_BAD_REQUEST, a file cut inside a line X_ENCODING. It passed
// history.LoadFile's plain error on.
func TestCheckFileRefusesWhatIsNotADumpWithACode(t *testing.T) {
	def := jobs.MustDefine("wrapped-check", func(s string) string { return s }, jobs.NoTenant[string](),
		func(*jobs.Ctx, string) (string, error) { return "", nil })
	set := &codec.Set{}
	if err := wrap.CheckFile(t.Context(), def, filepath.Join(t.TempDir(), "missing.jsonl"), set); !jobs.HasCode(err, jobs.CodeBadRequest) {
		t.Errorf("a missing file: %v; want %s", err, jobs.CodeBadRequest)
	}
	cut := filepath.Join(t.TempDir(), "cut.jsonl")
	if err := os.WriteFile(cut, []byte(`{"seq":1,"kind":"Run`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := wrap.CheckFile(t.Context(), def, cut, set); !jobs.HasCode(err, jobs.CodeEncoding) {
		t.Errorf("a file cut inside a line: %v; want %s", err, jobs.CodeEncoding)
	}
}
