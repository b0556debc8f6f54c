package api

import (
	"net/url"
	"time"
)

// Counters lists the perf counter mechanisms and targets.
func (c *Client) Counters() (CountersList, error) {
	var l CountersList
	return l, c.get("counters", nil, &l)
}

// CountersEnable makes the daemon count prog (an id, a name when unique, or
// name@tag) in windows of window (0: the daemon's --counters.window). It
// fails when the daemon cannot count it, with the reason.
func (c *Client) CountersEnable(prog string, window time.Duration) (CounterTarget, error) {
	q := url.Values{"prog": {prog}}
	if window > 0 {
		q.Set("window", window.String())
	}
	var t CounterTarget
	return t, c.post("counters/enable", q, &t)
}

// CountersDisable stops counting prog; a window that is open is closed and
// its counts stored.
func (c *Client) CountersDisable(prog string) (CounterTarget, error) {
	var t CounterTarget
	return t, c.post("counters/disable", url.Values{"prog": {prog}}, &t)
}

// CountersHistory returns the counting windows of prog between since and
// until.
func (c *Client) CountersHistory(prog string, since, until time.Time) (CounterHistory, error) {
	q := timeRange(since, until)
	q.Set("prog", prog)
	var h CounterHistory
	return h, c.get("counters/history", q, &h)
}
