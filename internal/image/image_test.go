package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bpfperf/bpfperf/internal/privtest"
)

// TestImage builds the image for amd64 and arm64 and reads it back with
// skopeo (containers/image: another implementation than the one that
// wrote it), as a runtime pulling for each architecture would: each
// platform's image has the daemon as its entrypoint and both binaries,
// static ELF files for that architecture. Built again from the same
// commit, the index has the same digest.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("skopeo"); err != nil {
		privtest.Skip(t, "skopeo not installed (apt-get install skopeo): it reads the image back")
	}
	dir := t.TempDir()
	archive, res := testImage(t)
	for _, b := range res.Images {
		t.Logf("%s: %s, layer %.1f MB, binaries %.1f MB", b.Platform, b.Digest, float64(b.LayerBytes)/1e6, float64(b.BinaryBytes)/1e6)
	}
	t.Logf("archive %.1f MB, index %s", float64(res.ArchiveBytes)/1e6, res.Digest)

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for arch, machine := range machines {
		var conf struct {
			Architecture string
			Config       struct{ Entrypoint []string }
		}
		out := skopeo(t, "inspect", "--config", "--override-arch", arch, "oci-archive:"+archive)
		if err := json.Unmarshal(out, &conf); err != nil {
			t.Fatalf("skopeo inspect --config: %v\n%s", err, out)
		}
		if conf.Architecture != arch || strings.Join(conf.Config.Entrypoint, " ") != "/usr/local/bin/bpfperfd" {
			t.Errorf("%s: config says architecture %q, entrypoint %q", arch, conf.Architecture, conf.Config.Entrypoint)
		}
		dest := filepath.Join(dir, "pulled-"+arch)
		skopeo(t, "copy", "--quiet", "--override-arch", arch, "oci-archive:"+archive, "dir:"+dest)
		for _, bin := range []string{"bpfperfd", "bpfperf"} {
			f := elfIn(t, dest, BinDir+"/"+bin)
			if f.Machine != machine {
				t.Errorf("%s image: %s is for %v, want %v", arch, bin, f.Machine, machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s image: %s is dynamically linked: the image has no libc", arch, bin)
				}
			}
		}
	}

	again, err := Build(testConfig, filepath.Join(dir, "oci2"), filepath.Join(dir, "again.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Errorf("built twice from one commit: index %s, then %s", res.Digest, again.Digest)
	}
}

func skopeo(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("skopeo", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("skopeo %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// elfIn reads name from the one layer skopeo copied into dir and parses
// it as ELF.
func elfIn(t *testing.T, dir, name string) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(layerFile(t, dir, name)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// layerFile reads name from the one layer skopeo copied into dir (its
// manifest.json names the layer's blob).
func layerFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	var m struct {
		Layers []struct{ Digest string }
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil || json.Unmarshal(b, &m) != nil || len(m.Layers) != 1 {
		t.Fatalf("%s/manifest.json: %v %s: want one layer", dir, err, b)
	}
	blob, err := os.Open(filepath.Join(dir, strings.TrimPrefix(m.Layers[0].Digest, "sha256:")))
	if err != nil {
		t.Fatal(err)
	}
	defer blob.Close()
	zr, err := gzip.NewReader(blob)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s: no %s in the layer", dir, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != name {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
}
