package query

import (
	"time"

	"github.com/bpfperf/bpfperf/daemon/sampler"
)

// EventStatsDuty is stored when stats go on for only part of each
// interval: at a daemon's start with --stats.duty below 100%, or when the
// stats budget cuts the share (sampler/duty.go). What is stored from there
// to the next stats_full, daemon_start or daemon_stop is scaled from part
// of each interval, so history marks it as estimates.
const EventStatsDuty = sampler.EventStatsDuty

// span is a time range, start exclusive, end inclusive: the points a
// daemon run stored after its start.
type span struct{ start, end time.Time }

func (s span) holds(t time.Time) bool { return t.After(s.start) && !t.After(s.end) }

// estimatedSpans returns the spans within since..until when a bpfperfd ran
// with a stats duty cycle: from each stats_duty event to the next
// stats_full, daemon_start or daemon_stop (or until).
func (q *Query) estimatedSpans(since, until time.Time) ([]span, error) {
	prev, err := q.Store.LastEventBefore(since, "daemon_start", "daemon_stop", EventStatsDuty, sampler.EventStatsFull)
	if err != nil {
		return nil, err
	}
	events, err := q.Store.Events(since, until)
	if err != nil {
		return nil, err
	}
	var spans []span
	on, start := prev != nil && prev.Kind == EventStatsDuty, since
	if on {
		start = prev.Time
	}
	for _, e := range events {
		switch e.Kind {
		case EventStatsDuty:
			on, start = true, e.Time
		case "daemon_start", "daemon_stop", sampler.EventStatsFull:
			if on && !e.Time.Equal(start) { // a start written with its own duty event
				spans = append(spans, span{start, e.Time})
				on = false
			}
		}
	}
	if on {
		spans = append(spans, span{start, until})
	}
	return spans, nil
}

// estimated says whether a point at t was stored under a duty cycle.
func estimated(t time.Time, spans []span) bool {
	for _, s := range spans {
		if s.holds(t) {
			return true
		}
	}
	return false
}
