package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	pprof "github.com/google/pprof/profile"
	"github.com/urfave/cli/v2"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/perfevent"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/profile/webui"
)

func profileCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "CPU profiles of BPF programs as pprof: capture, list, get, merge, diff, view",
		Description: "Profiles say where BPF programs spend CPU time, down to the function and source line,\n" +
			"tail-called programs included. Read them with `go tool pprof` or `bpfperf profile view`.\n" +
			"PROFILE is a profile id from `bpfperf profile list`, or a pprof file.",
		Subcommands: []*cli.Command{
			profileCaptureCommand(dial),
			profileListCommand(dial),
			profileGetCommand(dial),
			profileMergeCommand(dial),
			profileDiffCommand(dial),
			profileViewCommand(dial),
		},
	}
}

// profileFileFlag is -o of the subcommands that write a profile; needOutput
// reads it where it is required.
func profileFileFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: usage}
}

func profileCaptureCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "capture",
		Usage: "profile every CPU for --duration now, store the profile and write it to -o",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: 10 * time.Second, Usage: "how long to sample (at most the daemon's --profile.limit)"},
			&cli.StringFlag{Name: "event", Usage: "what to sample on: cpu-clock, cycles, instructions or llc-misses (the last three need a PMU); default the daemon's --profile.event"},
			profileFileFlag("write the profile (gzipped pprof) to FILE; - for stdout"),
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			d := c.Duration("duration")
			if d < profile.MinDuration {
				return fmt.Errorf("--duration %v: must be at least %v", d, profile.MinDuration)
			}
			if ev := c.String("event"); ev != "" {
				if _, err := perfevent.Parse(ev); err != nil {
					return fmt.Errorf("--event: %w", err)
				}
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			res, err := client.CaptureProfile(d, c.String("event"))
			if err != nil {
				return err
			}
			p, err := profile.ParseData(res.Data)
			if err != nil {
				return fmt.Errorf("daemon's answer: %w", err)
			}
			if out := c.String("output"); out != "" {
				if err := writeProfileFile(out, res.Data); err != nil {
					return err
				}
			}
			what := "profile " + res.ID
			if res.ID == "" {
				what = "profile (not stored: " + res.StoreError + ")"
			}
			return summary(c, what, p)
		},
	}
}

func profileListCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list stored profiles",
		Flags: append([]cli.Flag{
			outputFlag,
			&cli.StringFlag{Name: "kind", Value: "all", Usage: "continuous, on-demand or all"},
		}, timeRangeFlags("1h")...),
		Action: func(c *cli.Context) error {
			client, since, until, err := listRange(c, dial)
			if err != nil {
				return err
			}
			list, err := client.Profiles(since, until, c.String("kind"))
			if err != nil {
				return err
			}
			return render(c, os.Stdout, list, profilesTable(list))
		},
	}
}

func profileGetCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "get",
		Usage:     "write a stored profile to -o",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{profileFileFlag("write the profile (gzipped pprof) to FILE; - for stdout")},
		Action: func(c *cli.Context) error {
			id, err := oneArg(c, "ID")
			if err != nil {
				return err
			}
			out, err := needOutput(c)
			if err != nil {
				return err
			}
			client, err := dial(c)
			if err != nil {
				return err
			}
			data, err := client.Profile(id)
			if err != nil {
				return err
			}
			return writeProfileFile(out, data)
		},
	}
}

func profileMergeCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "add up the continuous profiles of a time range (or the PROFILEs given) into one",
		ArgsUsage: "[PROFILE...]",
		Flags: append([]cli.Flag{
			profileFileFlag("write the merged profile to FILE; - for stdout"),
			&cli.StringFlag{Name: "kind", Value: "continuous", Usage: "continuous, on-demand or all (on-demand captures sample the same time as continuous windows)"},
		}, timeRangeFlags("1h")...),
		Action: func(c *cli.Context) error {
			out, err := needOutput(c)
			if err != nil {
				return err
			}
			if c.NArg() > 0 {
				return mergeGivenProfiles(c, dial, out)
			}
			return mergeStoredProfiles(c, dial, out)
		},
	}
}

// mergeGivenProfiles merges the PROFILEs on the command line (files or
// stored ids) here.
func mergeGivenProfiles(c *cli.Context, dial clientFactory, out string) error {
	var ps []*pprof.Profile
	for _, arg := range c.Args().Slice() {
		p, err := loadProfile(c, dial, arg)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	p, err := profile.Merge(ps...)
	if err != nil {
		return err
	}
	return writeProfile(out, p, func() error { return summary(c, fmt.Sprintf("merged %d profiles", len(ps)), p) })
}

// mergeStoredProfiles has the daemon merge the stored profiles of --kind
// in the time range.
func mergeStoredProfiles(c *cli.Context, dial clientFactory, out string) error {
	client, since, until, err := dialRange(c, dial)
	if err != nil {
		return err
	}
	data, n, err := client.MergeProfiles(since, until, c.String("kind"))
	if err != nil {
		return err
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return fmt.Errorf("daemon's answer: %w", err)
	}
	if err := writeProfileFile(out, data); err != nil {
		return err
	}
	return summary(c, fmt.Sprintf("merged %d profiles", n), p)
}

func profileDiffCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "write the difference from --base to --new, for `go tool pprof` (as with -diff_base)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "base", Usage: "the PROFILE before (required)"},
			&cli.StringFlag{Name: "new", Usage: "the PROFILE after (required)"},
			profileFileFlag("write the diff profile to FILE; - for stdout"),
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			for _, f := range []string{"base", "new"} {
				if c.String(f) == "" {
					return fmt.Errorf("diff: --%s PROFILE is required", f)
				}
			}
			out, err := needOutput(c)
			if err != nil {
				return err
			}
			base, err := loadProfile(c, dial, c.String("base"))
			if err != nil {
				return fmt.Errorf("--base: %w", err)
			}
			new, err := loadProfile(c, dial, c.String("new"))
			if err != nil {
				return fmt.Errorf("--new: %w", err)
			}
			diff, err := profile.Diff(base, new)
			if err != nil {
				return err
			}
			return writeProfile(out, diff, func() error { return diffSummary(c, base, new) })
		},
	}
}

func profileViewCommand(dial clientFactory) *cli.Command {
	return &cli.Command{
		Name:      "view",
		Usage:     "serve pprof's web UI for a profile on loopback until interrupted",
		ArgsUsage: "PROFILE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "http", Value: "127.0.0.1:0", Usage: "loopback host:port to serve on (port 0 picks one)"},
		},
		Action: func(c *cli.Context) error {
			arg, err := oneArg(c, "PROFILE")
			if err != nil {
				return err
			}
			p, err := loadProfile(c, dial, arg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return webui.Serve(ctx, p, c.String("http"), func(url string) {
				fmt.Printf("serving %s on %s (Ctrl-C stops)\n", arg, url)
			})
		},
	}
}

func needOutput(c *cli.Context) (string, error) {
	out := c.String("output")
	if out == "" {
		return "", fmt.Errorf("%s: -o FILE is required (- for stdout)", c.Command.Name)
	}
	return out, nil
}

// loadProfile reads PROFILE: an existing file, else a stored profile id.
func loadProfile(c *cli.Context, dial clientFactory, arg string) (*pprof.Profile, error) {
	data, err := os.ReadFile(arg)
	switch {
	case err == nil:
		p, err := profile.ParseData(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", arg, oneLine(err))
		}
		return p, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	if _, perr := strconv.ParseUint(arg, 10, 64); perr != nil {
		return nil, fmt.Errorf("%s: no such file, and not a profile id", arg)
	}
	client, err := dial(c)
	if err != nil {
		return nil, err
	}
	if data, err = client.Profile(arg); err != nil {
		return nil, err
	}
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %s", arg, oneLine(err))
	}
	return p, nil
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// writeProfile writes p to out, then says what it holds.
func writeProfile(out string, p *pprof.Profile, say func() error) error {
	data, err := profile.Marshal(p)
	if err != nil {
		return err
	}
	if err := writeProfileFile(out, data); err != nil {
		return err
	}
	return say()
}

func writeProfileFile(path string, data []byte) error {
	if path == "-" {
		_, err := os.Stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	return nil
}

// summary prints one line about a profile, and the programs in it by CPU
// share, to stderr when the profile itself goes to stdout.
func summary(c *cli.Context, what string, p *pprof.Profile) error {
	w := os.Stdout
	if c.String("output") == "-" {
		w = os.Stderr
	}
	samples := profile.SampleCount(p)
	dur := time.Duration(p.DurationNanos).Round(time.Millisecond)
	line := fmt.Sprintf("%s: %v, %d samples", what, dur, samples)
	if out := c.String("output"); out != "" && out != "-" {
		line += ", written to " + out
	}
	fmt.Fprintln(w, line)
	shares, err := profile.ProgramShares(p)
	if err != nil || len(shares) == 0 {
		return nil
	}
	names := programNames(p)
	t := table{header: []string{"PROG_ID", "NAME", "SAMPLED_CPU%"}}
	for _, id := range sortedByShare(shares) {
		v := shares[id]
		t.rows = append(t.rows, []string{strconv.FormatUint(uint64(id), 10), names[id], fmtPercent(&v)})
	}
	return renderTable(w, t)
}

// diffSummary says what each program's sampled CPU share was in base and
// in new.
func diffSummary(c *cli.Context, base, new *pprof.Profile) error {
	w := os.Stdout
	if c.String("output") == "-" {
		w = os.Stderr
	}
	line := fmt.Sprintf("diff: base %d samples over %v, new %d samples over %v", profile.SampleCount(base), time.Duration(base.DurationNanos).Round(time.Millisecond), profile.SampleCount(new), time.Duration(new.DurationNanos).Round(time.Millisecond))
	if out := c.String("output"); out != "-" {
		line += fmt.Sprintf(", written to %s (go tool pprof -top %s: positive values grew)", out, out)
	}
	fmt.Fprintln(w, line)
	bs, err1 := profile.ProgramShares(base)
	ns, err2 := profile.ProgramShares(new)
	if err1 != nil || err2 != nil {
		return nil
	}
	names := programNames(base)
	maps.Copy(names, programNames(new))
	all := maps.Clone(ns)
	for id := range bs {
		all[id] = max(all[id], bs[id])
	}
	t := table{header: []string{"PROG_ID", "NAME", "BASE_CPU%", "NEW_CPU%", "CHANGE"}}
	for _, id := range sortedByShare(all) {
		b, n := bs[id], ns[id]
		d := n - b
		t.rows = append(t.rows, []string{strconv.FormatUint(uint64(id), 10), names[id], fmtPercent(&b), fmtPercent(&n), fmt.Sprintf("%+.2f pts", d)})
	}
	if len(t.rows) == 0 {
		return nil
	}
	return renderTable(w, t)
}

// programNames maps program ids to names from the samples' labels.
func programNames(p *pprof.Profile) map[uint32]string {
	names := map[uint32]string{}
	for _, s := range p.Sample {
		ids, ns := s.Label[profile.LabelProgID], s.Label[profile.LabelProgName]
		if len(ids) != 1 || len(ns) != 1 {
			continue
		}
		if id, err := strconv.ParseUint(ids[0], 10, 32); err == nil {
			names[uint32(id)] = ns[0]
		}
	}
	return names
}

func sortedByShare(shares map[uint32]float64) []uint32 {
	ids := slices.Collect(maps.Keys(shares))
	slices.SortFunc(ids, func(a, b uint32) int {
		if c := cmp.Compare(shares[b], shares[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return ids
}

func profilesTable(list []api.ProfileInfo) table {
	t := table{
		header: []string{"ID", "START", "DURATION", "KIND", "EVENT", "HZ", "SAMPLES", "SIZE"},
		fields: []string{"id", "start", "duration_ns", "kind", "event", "hz", "samples", "bytes"},
	}
	for _, p := range list {
		t.rows = append(t.rows, []string{p.ID, p.Start.Local().Format("2006-01-02 15:04:05"), time.Duration(p.Duration).Round(time.Millisecond).String(), p.Kind, p.Event, strconv.Itoa(p.Hz), strconv.FormatInt(p.Samples, 10), fmtBytes(int64(p.Bytes))})
		t.raw = append(t.raw, []string{p.ID, p.Start.UTC().Format(time.RFC3339Nano), strconv.FormatInt(p.Duration, 10), p.Kind, p.Event, strconv.Itoa(p.Hz), strconv.FormatInt(p.Samples, 10), strconv.Itoa(p.Bytes)})
	}
	return t
}
