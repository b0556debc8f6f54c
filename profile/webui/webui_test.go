package webui

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func testProfile() *profile.Profile {
	m := &profile.Mapping{ID: 1, File: "[bpf]", HasFunctions: true}
	fn := &profile.Function{ID: 1, Name: "hot_loop", Filename: "xdp.c"}
	loc := &profile.Location{ID: 1, Mapping: m, Address: 0xffffffffc0001000, Line: []profile.Line{{Function: fn, Line: 12}}}
	return &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10101010,
		DurationNanos: 10e9,
		Mapping:       []*profile.Mapping{m},
		Function:      []*profile.Function{fn},
		Location:      []*profile.Location{loc},
		Sample:        []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{3, 30303030}}},
	}
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, testProfile(), "127.0.0.1:0", func(u string) { urls <- u }) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("web ui did not start")
	}
	for _, page := range []string{"top", "flamegraph", "source?f=hot_loop"} {
		resp, err := http.Get(url + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hot_loop") {
			t.Errorf("%s: %s\n%.300s", page, resp.Status, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080", "nonsense"} {
		if err := Serve(context.Background(), testProfile(), addr, nil); err == nil {
			t.Errorf("Serve(%q): no error", addr)
		}
	}
}

// TestHandlers: pprof's views of a profile, without the views that write
// its settings, also for a service with no $HOME.
func TestHandlers(t *testing.T) {
	t.Setenv("HOME", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	h, err := Handlers(testProfile())
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"/saveconfig", "/deleteconfig"} {
		if h[gone] != nil {
			t.Errorf("%s is served: it writes pprof's settings file", gone)
		}
	}
	for _, page := range []string{"/flamegraph", "/top"} {
		rec := httptest.NewRecorder()
		h[page].ServeHTTP(rec, httptest.NewRequest("GET", page, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "hot_loop") {
			t.Errorf("%s: %d\n%.300s", page, rec.Code, rec.Body.String())
		}
	}
}
