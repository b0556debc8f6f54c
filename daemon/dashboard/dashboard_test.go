package dashboard

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

// maxWeight is issue 14's budget for everything the dashboard ships.
const maxWeight = 300 << 10

// TestFilesLinked: every file a page or module asks for is embedded, and
// all of them together stay within the page-weight budget.
func TestFilesLinked(t *testing.T) {
	files := Files()
	refs := regexp.MustCompile(`(?:src|href)="([^":?#]+)"|from '(\./[^']+)'`)
	total := 0
	err := fs.WalkDir(files, ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		total += len(b)
		if !strings.HasSuffix(name, ".html") && !strings.HasSuffix(name, ".js") {
			return nil
		}
		for _, m := range refs.FindAllStringSubmatch(string(b), -1) {
			ref := m[1] + m[2]
			if ref == "./" || strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, ".html") && strings.HasSuffix(name, ".js") {
				continue // the front page, the daemon's own routes, links between pages
			}
			if _, err := fs.Stat(files, path.Join(path.Dir(name), ref)); err != nil {
				t.Errorf("%s asks for %s: %v", name, ref, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > maxWeight {
		t.Errorf("the dashboard's files weigh %d bytes, more than %d", total, maxWeight)
	}
	t.Logf("dashboard files: %d bytes", total)
}

func TestHandlerServesFront(t *testing.T) {
	for page, want := range map[string]string{"/": "js/programs.js", "/program.html": "js/program.js", "/js/lib.js": "export async function getJSON"} {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest("GET", page, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d, no %q", page, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/nothing.js", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing.js: %d, want 404", rec.Code)
	}
}
