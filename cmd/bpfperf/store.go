package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/store"
)

func storeCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "store",
		Usage: "inspect the daemon's store",
		Subcommands: []*cli.Command{
			{
				Name:  "stats",
				Usage: "size, series, samples, bytes per sample, oldest and newest sample",
				Flags: []cli.Flag{outputFlag},
				Action: func(c *cli.Context) error {
					if err := checkOutput(c); err != nil {
						return err
					}
					client, err := dial(c)
					if err != nil {
						return err
					}
					st, err := client.StoreStats()
					if err != nil {
						return err
					}
					return render(c, os.Stdout, storeStatsJSON(st), storeStatsTable(st))
				},
			},
			{
				Name:  "check",
				Usage: "read the whole store and say what is wrong with it",
				Flags: []cli.Flag{
					outputFlag,
					&cli.StringFlag{Name: "file", Usage: "check this store file directly (the daemon must not be running on it)"},
				},
				Action: storeCheck(dial),
			},
			{
				Name:  "salvage",
				Usage: "copy every readable record of a damaged store file into a new store, and say what was lost",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "file", Required: true, Usage: "the damaged store file (read, never written)"},
					&cli.StringFlag{Name: "to", Required: true, Usage: "the new store file to write (must not exist)"},
				},
				Action: storeSalvage,
			},
		},
	}
}

func storeStatsTable(st api.StoreStats) table {
	t := table{
		header: []string{"RESOLUTION", "SERIES", "CHUNKS", "SAMPLES", "BYTES", "BYTES/SAMPLE"},
		fields: []string{"resolution", "series", "chunks", "samples", "bytes", "bytes_per_sample"},
	}
	for _, name := range shownResolutions {
		g := st.Groups[name]
		t.rows = append(t.rows, []string{name, strconv.Itoa(g.Series), strconv.Itoa(g.Chunks), strconv.FormatInt(g.Samples, 10), strconv.FormatInt(g.Bytes, 10), strconv.FormatFloat(g.BytesPerSample(sampleColumns(name)), 'f', 2, 64)})
	}
	return t
}

// shownResolutions are the store stats table's rows.
var shownResolutions = []string{"raw", "1m0s", "1h0m0s"}

// sampleColumns is how many counters one sample of a resolution holds: a
// raw sample has three; a rollup point twice that (first and last of its
// bucket) plus two offsets.
func sampleColumns(resolution string) int {
	if resolution == "raw" {
		return 3
	}
	return 8
}

// storeStatsDoc is store stats' JSON: the daemon's answer, with the
// bytes per sample the table works out for each resolution it shows.
type storeStatsDoc struct {
	api.StoreStats
	// Groups shadows StoreStats' "resolutions" (the shallower field wins
	// in encoding/json), with the same keys.
	Groups map[string]storeGroupDoc `json:"resolutions"`
}

type storeGroupDoc struct {
	api.GroupStats
	BytesPerSample *float64 `json:"bytes_per_sample,omitempty"` // raw, 1m0s and 1h0m0s
}

func storeStatsJSON(st api.StoreStats) storeStatsDoc {
	doc := storeStatsDoc{StoreStats: st, Groups: map[string]storeGroupDoc{}}
	for name, g := range st.Groups {
		doc.Groups[name] = storeGroupDoc{GroupStats: g}
	}
	for _, name := range shownResolutions {
		g := st.Groups[name]
		bps := g.BytesPerSample(sampleColumns(name))
		doc.Groups[name] = storeGroupDoc{GroupStats: g, BytesPerSample: &bps}
	}
	return doc
}

func storeCheck(dial clientFactory) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := checkOutput(c); err != nil {
			return err
		}
		if c.NArg() > 0 {
			return fmt.Errorf("store check takes no arguments, got %q (use --file FILE for a file)", c.Args().First())
		}
		if path := c.String("file"); path != "" {
			return storeCheckFile(c, path)
		}
		client, err := dial(c)
		if err != nil {
			return err
		}
		res, err := client.StoreCheck()
		if err != nil {
			return err
		}
		if len(res.Problems) > 0 {
			return reportProblems(c, &store.DamageError{Path: "of the daemon", Problems: res.Problems})
		}
		return reportProblems(c, nil)
	}
}

// Exit statuses of `store check`.
const (
	exitDamaged    = 1
	exitUnreadable = 2
)

// storeCheckFile proves a file without the daemon: it never writes to it,
// and a page that would crash or hang a reader only crashes or hangs the
// child the check runs in (store.CheckFile).
func storeCheckFile(c *cli.Context, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return cli.Exit(fmt.Sprintf("--file %s: %s", path, osReason(err)), exitUnreadable)
	}
	if fi.IsDir() {
		return cli.Exit(fmt.Sprintf("--file %s is a directory, not a store file", path), exitUnreadable)
	}
	err = store.CheckFile(c.Context, path, true)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%s is open in a running bpfperfd: run `bpfperf store check` without --file", path)
	}
	var damage *store.DamageError
	if err != nil && !errors.As(err, &damage) {
		return cli.Exit(fmt.Sprintf("--file %s: %s", path, osReason(err)), exitUnreadable)
	}
	return reportProblems(c, damage)
}

// osReason is an OS error without Go's "open PATH:" prefix.
func osReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// shownProblems is how many problems the text output lists before the
// summary line: a broken page tree can list hundreds; -o json has them all.
const shownProblems = 2

func reportProblems(c *cli.Context, damage *store.DamageError) error {
	var problems []string
	if damage != nil {
		problems = damage.Problems
	}
	if c.String("output") == "json" {
		if err := render(c, os.Stdout, map[string]any{"ok": damage == nil, "unreadable": damage != nil && damage.Unreadable, "problems": append([]string{}, problems...)}, table{}); err != nil {
			return err
		}
	} else if damage == nil {
		fmt.Println("store is consistent")
	} else {
		w := bufio.NewWriter(os.Stdout)
		for _, p := range problems[:min(len(problems), shownProblems)] {
			fmt.Fprintln(w, p)
		}
		w.Flush()
	}
	if damage == nil {
		return nil
	}
	what, code := "damaged", exitDamaged
	if damage.Unreadable {
		what, code = "unreadable", exitUnreadable
	}
	msg := fmt.Sprintf("store %s is %s: %d %s", damage.Path, what, len(problems), plural(len(problems), "problem", "problems"))
	if n := len(problems) - shownProblems; n > 0 && c.String("output") != "json" {
		msg += fmt.Sprintf(" (%d not shown: -o json lists them all)", n)
	}
	return cli.Exit(msg, code)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func exportCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "stream raw samples of every program as CSV or JSON lines",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "csv", Usage: "csv or jsonl"},
		}, timeRangeFlags("1d")...),
		Action: func(c *cli.Context) error {
			if err := checkFormat(c, "csv", "jsonl"); err != nil {
				return err
			}
			client, since, until, err := dialRange(c, dial)
			if err != nil {
				return err
			}
			w := bufio.NewWriterSize(os.Stdout, 64<<10)
			if err := client.Export(w, since, until, c.String("output")); err != nil {
				w.Flush()
				return err
			}
			return w.Flush()
		},
	}
}
