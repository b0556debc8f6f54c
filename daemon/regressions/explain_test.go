package regressions

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/store"
)

// TestExplainWithoutProfilesIsOneLine: with no profiles on either side,
// the explanation `regressions show` prints after "profile" names both
// empty windows on one line (it once put the second on a line of its own,
// under no label).
func TestExplainWithoutProfilesIsOneLine(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "bpfperf.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dt := New(regress.Config{Window: 8 * time.Second}, Deps{Store: db, ProfilesOn: true})
	t0 := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	ex := dt.explain("p", t0, t0.Add(8*time.Second), t0.Add(8*time.Second), t0.Add(16*time.Second))
	if strings.Contains(ex.Off, "\n") || strings.Count(ex.Off, "no profiles between") != 2 {
		t.Fatalf("explanation %q: want both empty windows named on one line", ex.Off)
	}
}
