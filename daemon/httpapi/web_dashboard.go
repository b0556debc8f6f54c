package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/daemon/dashboard"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/profile/webui"
	"github.com/bpfperf/bpfperf/store"
)

// The browser dashboard (issue 14) on the TCP listener: its static files
// at /, and pprof's own web UI (flame graph, top, source, ...) for stored
// profiles under /ui/pprof/: one profile by id, the continuous windows of
// a range merged, or the difference of two. The pages read /v1 like the
// CLI; nothing here changes state.

// pprofUIs is how many profiles' pprof UIs are kept built: a page and its
// flame graph, top and source views ask for the same one in turn.
const pprofUIs = 8

func (d *daemon) dashboardRoutes(mux *http.ServeMux) {
	ui := &pprofCache{d: d}
	mux.Handle("GET /", dashboard.Handler())
	mux.HandleFunc("GET /ui/pprof/id/{id}/{view...}", ui.serve(func(r *http.Request) (*pprof.Profile, error) {
		return profiling.Stored(d.Store, r.PathValue("id"))
	}))
	mux.HandleFunc("GET /ui/pprof/merge/{since}/{until}/{view...}", ui.serve(func(r *http.Request) (*pprof.Profile, error) {
		since, err := unixParam(r, "since")
		if err != nil {
			return nil, err
		}
		until, err := unixParam(r, "until")
		if err != nil {
			return nil, err
		}
		if !until.After(since) {
			return nil, fmt.Errorf("%w: until must be after since", errs.BadRequest)
		}
		list, err := d.Store.ListProfiles(since, until)
		if err != nil {
			return nil, err
		}
		continuous := list[:0]
		for _, p := range list {
			if p.Kind == store.ProfileContinuous {
				continuous = append(continuous, p)
			}
		}
		return profiling.MergeStored(d.Store, continuous, since, until)
	}))
	mux.HandleFunc("GET /ui/pprof/diff/{base}/{id}/{view...}", ui.serve(func(r *http.Request) (*pprof.Profile, error) {
		base, err := profiling.Stored(d.Store, r.PathValue("base"))
		if err != nil {
			return nil, err
		}
		p, err := profiling.Stored(d.Store, r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return profile.Diff(base, p)
	}))
}

// unixParam reads a path value in unix seconds.
func unixParam(r *http.Request, name string) (time.Time, error) {
	v := r.PathValue(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not unix seconds", errs.BadRequest, name, v)
	}
	return time.Unix(n, 0), nil
}

// pprofCache keeps the pprof UIs of the last profiles asked for, by the
// path that names them.
type pprofCache struct {
	d     *daemon
	mu    sync.Mutex
	uis   map[string]map[string]http.Handler
	order []string // oldest first
}

// serve answers {view} of the pprof UI of the profile load reads for the
// request's path.
func (c *pprofCache) serve(load func(*http.Request) (*pprof.Profile, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		view := r.PathValue("view")
		key := r.URL.Path[:len(r.URL.Path)-len(view)]
		handlers, err := c.get(key, func() (map[string]http.Handler, error) {
			p, err := load(r)
			if err != nil {
				return nil, err
			}
			return webui.Handlers(p)
		})
		if err != nil {
			reply(w, nil, err)
			return
		}
		h := handlers["/"+view]
		if h == nil {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + view
		h.ServeHTTP(w, r2)
	}
}

func (c *pprofCache) get(key string, build func() (map[string]http.Handler, error)) (map[string]http.Handler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.uis[key]; ok {
		return h, nil
	}
	h, err := build()
	if err != nil {
		return nil, err
	}
	if c.uis == nil {
		c.uis = map[string]map[string]http.Handler{}
	}
	c.uis[key] = h
	c.order = append(c.order, key)
	if len(c.order) > pprofUIs {
		delete(c.uis, c.order[0])
		c.order = c.order[1:]
	}
	return h, nil
}
