// Package dashboard is the browser dashboard bpfperfd serves on its
// opt-in TCP listener (issue 14): hand-written HTML, CSS and ES modules
// that read the same /v1 JSON the CLI reads, and uPlot (vendored from npm,
// assets/vendor) for the time series. Everything is embedded, so the
// daemon serves the dashboard with no network and no build step.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Files are the dashboard's files, rooted at its index.html.
func Files() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	return sub
}

// Handler serves the dashboard's files. They change only with the binary,
// so browsers may keep them a while.
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}
