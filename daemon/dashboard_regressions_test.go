package daemon_test

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestDashboardRegressions: a real regression (a reload with 1.5x the
// work, as in TestRegressionExplained) is listed on the Regressions page
// with its program, kind and ratio, linked to its own page, which shows
// the evidence and puts the added line on top of what the profiles say
// changed. Every page's navigation reaches it.
func TestDashboardRegressions(t *testing.T) {
	privtest.Root(t)
	const window = 4 * time.Second
	web := freeAddr(t)
	d := startDaemon(t, t.TempDir(), "--web.listen-address", web, "--regressions.window", window.String(),
		"--profile.every", "1s", "--profile.duration", "1s", "--profile.hz", "499")
	b := newBrowser(t, "http://"+web+"/")

	name := uniqueName("rg_dash")
	old := loadWorkProgram(t, "work", name)
	stopOld := pace(t, old, 100)
	time.Sleep(window + time.Second)
	stopNew := pace(t, loadWorkProgram(t, "work_more", name), 100)
	t.Cleanup(stopNew)
	stopOld()
	oldID := progID(t, old)
	old.Close()
	var found []api.Regression
	deadline := time.Now().Add(window + 10*time.Second)
	for len(found) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		d.json(t, &found, "regressions", "--since", "1h", "--prog", name)
	}
	if len(found) != 1 || found[0].Kind != "regression" {
		t.Fatalf("findings %+v, want one regression\n%s", found, d.stderr)
	}
	r := found[0]

	list := b.dom(t, "regressions.html", "regressions")
	row := fmt.Sprintf(`<a href="program.html?prog=%d">%s</a>`, r.ProgID, name)
	if !strings.Contains(list, `<tr class="regression">`) || !strings.Contains(list, row) ||
		!strings.Contains(list, fmt.Sprintf("×%.3f", r.Ratio)) || !strings.Contains(list, fmt.Sprintf(`href="regressions.html?id=%s"`, r.ID)) {
		t.Errorf("regressions page: no regression row of %s (ratio ×%.3f) linking to %s:\n%.3000s", name, r.Ratio, r.ID, list)
	}
	one := b.dom(t, "regressions.html?id="+r.ID, "regression")
	if !strings.Contains(one, "regression "+r.ID+": "+name) || !strings.Contains(one, `id="evidence"`) ||
		!pageShowsP(one, r.P) || !strings.Contains(one, `id="explanation"`) {
		t.Errorf("finding page: no heading, evidence (p = %.2g) or explanation for %s:\n%.3000s", r.P, r.ID, one)
	}
	if !strings.Contains(one, `<td class="text">extra_work work.c:`) {
		t.Errorf("finding page: the added line extra_work work.c is not in what changed:\n%.3000s", one)
	}
	if !strings.Contains(one, fmt.Sprintf(`href="/v1/regressions/%s/diff"`, r.ID)) {
		t.Errorf("finding page: no link to the profile diff")
	}
	if strings.Contains(list+one, `class="error"`) {
		t.Errorf("a regressions page shows an error")
	}
	// The old version, unloaded, is behind the front page's toggle.
	oldRow := fmt.Sprintf(`<a href="program.html?prog=%d">%s</a>`, oldID, name)
	front := b.dom(t, "", "")
	if !strings.Contains(front, `href="regressions.html"`) {
		t.Errorf("front page: no navigation link to the regressions page")
	}
	if strings.Contains(front, oldRow) || !strings.Contains(front, fmt.Sprintf(`<a href="program.html?prog=%d">%s</a>`, r.ProgID, name)) {
		t.Errorf("front page: want the loaded version %d listed and the unloaded %d not", r.ProgID, oldID)
	}
	withAll := b.dom(t, "?all=1", "")
	if i := strings.Index(withAll, oldRow); i < 0 || !strings.Contains(withAll[max(0, i-300):i], `<tr class="unloaded">`) {
		t.Errorf("front page with ?all=1: no unloaded row for version %d:\n%.3000s", oldID, withAll)
	}
}

// pageShowsP says whether page shows p to two significant digits, as
// the page writes it (JavaScript's toPrecision(2): 0.000025 where Go's
// %.2g writes 2.5e-05; CI compared those strings once and failed).
func pageShowsP(page string, p float64) bool {
	m := regexp.MustCompile(`p = ([0-9.e+-]+)`).FindStringSubmatch(page)
	if m == nil {
		return false
	}
	shown, err := strconv.ParseFloat(m[1], 64)
	return err == nil && math.Abs(shown-p) <= 0.06*p
}
