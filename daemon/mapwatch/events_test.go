package mapwatch

import (
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/collectors"
)

// feed gives a map readings of entries at one per minute and returns the
// kinds and thresholds of the events raised, in order.
func feed(m *watchedMap, window time.Duration, entries ...int64) []string {
	t0 := time.Unix(1_700_000_000, 0)
	var out []string
	for i, n := range entries {
		m.info.Entries = n
		for _, e := range m.events(t0.Add(time.Duration(i)*time.Minute), window) {
			s := e.Kind
			for _, th := range []string{"80%", "95%"} {
				if strings.Contains(e.Detail, "crossed "+th) {
					s += " " + th
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func TestMapEvents(t *testing.T) {
	hash := collectors.MapInfo{ID: 1, Name: "flows", Type: "hash", MaxEntries: 100}
	const window = 5 * time.Minute
	for _, c := range []struct {
		name    string
		info    collectors.MapInfo
		entries []int64
		want    string
	}{
		{"below 80%", hash, []int64{10, 50, 79, 50}, ""},
		{"80 then 95, once each", hash, []int64{50, 81, 85, 96, 99, 97}, "map_fill 80%,map_fill 95%"},
		{"straight past both", hash, []int64{10, 99}, "map_fill 80%,map_fill 95%"},
		{"hovering at 80% fires once", hash, []int64{80, 79, 80, 78, 80}, "map_fill 80%"},
		{"re-armed after falling well below", hash, []int64{80, 60, 80}, "map_fill 80%,map_fill 80%"},
		{"95 re-armed to 80", hash, []int64{95, 85, 95}, "map_fill 80%,map_fill 95%,map_fill 95%"},
		{"full array: nothing", collectors.MapInfo{ID: 2, Type: "array", MaxEntries: 16}, []int64{-1, -1, -1, -1, -1, -1, -1, -1}, ""},
		{"partial walk: nothing", collectors.MapInfo{ID: 3, Type: "lpm_trie", MaxEntries: 100, Partial: true}, []int64{90, 99}, ""},
		// A leak: growth at every reading for the whole window, once.
		{"leak", collectors.MapInfo{ID: 4, Type: "hash", MaxEntries: 1000}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "map_leak"},
		{"too short for a leak", collectors.MapInfo{ID: 5, Type: "hash", MaxEntries: 1000}, []int64{1, 2, 3, 4}, ""},
		{"grew then held: no leak", collectors.MapInfo{ID: 6, Type: "hash", MaxEntries: 1000}, []int64{1, 5, 5, 5, 5, 5, 5, 5}, ""},
		{"shrank in the window: no leak", collectors.MapInfo{ID: 7, Type: "hash", MaxEntries: 1000}, []int64{1, 2, 3, 2, 3, 4, 5}, ""},
		{"leak, stops, leaks again", collectors.MapInfo{ID: 8, Type: "hash", MaxEntries: 1000}, []int64{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7}, "map_leak,map_leak"},
	} {
		m := &watchedMap{info: c.info}
		got := strings.Join(feed(m, window, c.entries...), ",")
		if got != c.want {
			t.Errorf("%s: events %q, want %q", c.name, got, c.want)
		}
	}
}
