package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWebLimitRequests: with --web.max-requests 1, a request that comes
// while one is being answered gets 503 at once, with Retry-After, rather
// than queueing behind it; once the first is answered the next is served.
func TestWebLimitRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(limitRequests(slow, 1))
	defer srv.Close()

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/slow")
		if err != nil {
			t.Error(err)
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered

	// A limit that queued would hang here: give up after a while.
	quick := &http.Client{Timeout: 5 * time.Second}
	resp, err := quick.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), "--web.max-requests") {
		t.Errorf("a second request while one runs: %d, Retry-After %q, %s; want 503, 1 and the flag named",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the first request: %d, want 200", code)
	}
	resp, err = http.Get(srv.URL + "/fast")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request after the first was answered: %d, want 200", resp.StatusCode)
	}
}
