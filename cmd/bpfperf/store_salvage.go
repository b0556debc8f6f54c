package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/store"
)

// storeSalvage copies what is readable of a damaged store into a new one,
// prints what was kept and lost, and proves the new store.
func storeSalvage(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("store salvage takes no arguments, got %q", c.Args().First())
	}
	from, to := c.String("file"), c.String("to")
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("--file %s: %s", from, osReason(err))
	}
	rep, err := store.Salvage(from, to)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if rep.Meta != "" {
		fmt.Fprintln(w, "meta: "+rep.Meta)
	}
	t := table{header: []string{"BUCKET", "KEPT", "DROPPED", "LOST PAGES"}}
	for _, b := range rep.Buckets {
		t.rows = append(t.rows, []string{b.Name, strconv.Itoa(b.Kept), strconv.Itoa(b.Dropped), strconv.Itoa(b.LostPages)})
	}
	if err := renderTable(w, t); err != nil {
		return err
	}
	for _, l := range rep.Lost {
		fmt.Fprintln(w, "lost: "+l)
	}
	if err := store.CheckFile(c.Context, to, true); err != nil {
		w.Flush()
		return fmt.Errorf("the salvaged store does not pass check: %w", err)
	}
	fmt.Fprintf(w, "%s holds what was readable of %s and passes store check; %s was not changed\n", to, from, from)
	return nil
}
