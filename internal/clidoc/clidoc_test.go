package clidoc

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func testApp() *cli.App {
	return &cli.App{
		Name:  "tool",
		Usage: "do a thing",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Value: "/run/x.sock", EnvVars: []string{"X_SOCKET"}, Usage: "the `PATH` of the socket"},
			&cli.BoolFlag{Name: "hidden", Hidden: true},
		},
		Commands: []*cli.Command{{
			Name:      "get",
			Usage:     "get one <thing>",
			ArgsUsage: "ID|last",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table|json"},
				&cli.BoolFlag{Name: "all", Usage: "all of *them*"},
				&cli.DurationFlag{Name: "wait", Value: 2 * time.Second},
				&cli.StringSliceFlag{Name: "prog", Usage: "a program"},
			},
			Subcommands: []*cli.Command{{Name: "gone", Hidden: true}},
		}},
	}
}

func TestMarkdown(t *testing.T) {
	want := "## tool\n\ndo a thing\n\n```\ntool [flags] COMMAND\n```\n\n" +
		"| flag | default | environment | what it does |\n| --- | --- | --- | --- |\n" +
		"| `--socket` | `/run/x.sock` | `X_SOCKET` | the `PATH` of the socket |\n\n" +
		"### tool get\n\nget one &lt;thing&gt;\n\n```\ntool get [flags] ID|last\n```\n\n" +
		"| flag | default | environment | what it does |\n| --- | --- | --- | --- |\n" +
		"| `--output`, `-o` | `table` |  | table\\|json |\n" +
		"| `--all` |  |  | all of \\*them\\* |\n" +
		"| `--wait` | `2s` |  |  |\n" +
		"| `--prog` (repeatable) |  |  | a program |\n\n"
	if got := Markdown(testApp()); got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.md")
	begin, end := markers("tool")
	doc := "# Flags\n\n" + begin + "old\n" + end + "\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Check(path, testApp(), false); !errors.Is(err, ErrStale) {
		t.Fatalf("Check of a stale file: %v, want ErrStale", err)
	}
	if err := Check(path, testApp(), true); err != nil {
		t.Fatalf("Check -update: %v", err)
	}
	if err := Check(path, testApp(), false); err != nil {
		t.Fatalf("Check after -update: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Flags\n\n" + begin + "\n" + Markdown(testApp()) + end + "\nafter\n"; string(b) != want {
		t.Errorf("after -update the file is\n%s\nwant\n%s", b, want)
	}
	if _, err := Splice([]byte("# Flags\n"), "tool", "x"); err == nil {
		t.Error("Splice into a file without markers: no error")
	}
}
