package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

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
					return render(c, os.Stdout, st, storeStatsTable(st))
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
		},
	}
}

func storeStatsTable(st api.StoreStats) table {
	t := table{
		header: []string{"RESOLUTION", "SERIES", "CHUNKS", "SAMPLES", "BYTES", "BYTES/SAMPLE"},
		fields: []string{"resolution", "series", "chunks", "samples", "bytes", "bytes_per_sample"},
	}
	for _, name := range []string{"raw", "1m0s", "1h0m0s"} {
		g := st.Groups[name]
		// A raw sample has three counters; a rollup point twice that
		// (first and last of its bucket) plus two offsets.
		cols := 3
		if name != "raw" {
			cols = 8
		}
		t.rows = append(t.rows, []string{name, strconv.Itoa(g.Series), strconv.Itoa(g.Chunks), strconv.FormatInt(g.Samples, 10), strconv.FormatInt(g.Bytes, 10), strconv.FormatFloat(g.BytesPerSample(cols), 'f', 2, 64)})
	}
	return t
}

func storeCheck(dial clientFactory) cli.ActionFunc {
	return func(c *cli.Context) error {
		if err := checkOutput(c); err != nil {
			return err
		}
		var problems []string
		if path := c.String("file"); path != "" {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("--file: %w", err)
			}
			db, err := store.Open(path, store.Options{Timeout: 200 * time.Millisecond, ReadOnly: true})
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%s is open in a running bpfperfd: run `bpfperf store check` without --file", path)
			}
			if err != nil {
				return err
			}
			defer db.Close()
			if problems, err = db.Check(); err != nil {
				return err
			}
		} else {
			client, err := dial(c)
			if err != nil {
				return err
			}
			res, err := client.StoreCheck()
			if err != nil {
				return err
			}
			problems = res.Problems
		}
		if c.String("output") == "json" {
			return render(c, os.Stdout, map[string]any{"ok": len(problems) == 0, "problems": problems}, table{})
		}
		w := bufio.NewWriter(os.Stdout)
		for _, p := range problems {
			fmt.Fprintln(w, p)
		}
		w.Flush()
		if len(problems) > 0 {
			return fmt.Errorf("store check: %d problems", len(problems))
		}
		fmt.Println("store is consistent")
		return nil
	}
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
