// Command mkimage builds bpfperf's OCI image for amd64 and arm64 (`make
// image`): dist/bpfperf-image.tar, an OCI archive for `ctr images import`
// and `podman load`, and dist/oci, the same as an OCI image layout.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/internal/image"
)

func main() {
	root := flag.String("root", ".", "the repository")
	layoutDir := flag.String("layout", "dist/oci", "OCI image layout to write (replaced)")
	archive := flag.String("o", "dist/bpfperf-image.tar", "OCI archive to write")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "platforms, comma-separated")
	version := flag.String("version", "dev", "version: the image's tag and the binaries' -version")
	commit := flag.String("commit", "", "commit the binaries say they were built from")
	flag.Parse()
	created, err := sourceDate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(2)
	}
	res, err := image.Build(image.Config{
		Root: *root, Platforms: strings.Split(*platforms, ","), Version: *version, Commit: *commit, Created: created,
	}, *layoutDir, *archive)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	fmt.Printf("%s:%s  index %s\n", image.Name, *version, res.Digest)
	for _, b := range res.Images {
		fmt.Printf("  %-12s %s  layer %.1f MB compressed, binaries %.1f MB\n", b.Platform, b.Digest, mb(b.LayerBytes), mb(b.BinaryBytes))
	}
	fmt.Printf("%s (%.1f MB), %s\n", res.Archive, mb(res.ArchiveBytes), res.Layout)
}

// sourceDate is SOURCE_DATE_EPOCH (reproducible builds' convention), else
// the Unix epoch: never the wall clock, so a commit gives one digest.
func sourceDate() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
	}
	return time.Unix(s, 0).UTC(), nil
}

func mb(b int64) float64 { return float64(b) / 1e6 }
