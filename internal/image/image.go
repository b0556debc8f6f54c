// Package image builds bpfperf's container image without a container
// engine: bpfperfd and bpfperf, built static for each platform, in one
// layer of an image that has nothing else (no shell, no libc: both are
// static Go binaries), and the platforms' images in one OCI index.
//
// It writes the index as an OCI image layout (a directory) and as an OCI
// archive (that directory in a tar), which `ctr images import` and
// `podman load` take. Nothing is pulled: every image starts from
// go-containerregistry's empty image, and every timestamp is the commit's
// (SOURCE_DATE_EPOCH), so the same commit gives the same digests.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Name is the image's name in the archive, as a runtime imports it.
const Name = "docker.io/bpfperf/bpfperf"

// Where things are in the image: the binaries, and the directories the
// daemon keeps its store and its socket in (those of the systemd unit).
const (
	BinDir    = "usr/local/bin"
	StateDir  = "var/lib/bpfperf"
	SocketDir = "run/bpfperf"
)

// Config says what to build.
type Config struct {
	// Root is the repository (the module with ./cmd/bpfperfd).
	Root string
	// Platforms are "linux/amd64", "linux/arm64".
	Platforms []string
	// Version tags the image and goes into the binaries, as `make build`
	// puts it; Commit too.
	Version, Commit string
	// Created is every timestamp in the image.
	Created time.Time
}

// Result is what Build wrote.
type Result struct {
	Layout, Archive string
	Digest          v1.Hash // the index's
	ArchiveBytes    int64
	// Images are the platforms' images, in Config.Platforms' order.
	Images []Built
}

// Built is one platform's image.
type Built struct {
	Platform    string
	Digest      v1.Hash
	LayerBytes  int64 // compressed, as pulled
	BinaryBytes int64 // both binaries, uncompressed
}

// Build cross-builds both binaries for each platform, makes an image of
// each, and writes their index at layoutDir (replaced) and archive.
func Build(cfg Config, layoutDir, archive string) (Result, error) {
	res := Result{Layout: layoutDir, Archive: archive}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	tmp, err := os.MkdirTemp("", "bpfperf-image-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	for _, platform := range cfg.Platforms {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok || goos != "linux" {
			return res, fmt.Errorf("platform %q: want linux/ARCH", platform)
		}
		files, size, err := buildBinaries(cfg, arch, filepath.Join(tmp, arch))
		if err != nil {
			return res, err
		}
		img, err := platformImage(cfg, arch, files)
		if err != nil {
			return res, fmt.Errorf("%s image: %w", platform, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return res, err
		}
		layers, err := img.Layers()
		if err != nil {
			return res, err
		}
		lsize, err := layers[0].Size()
		if err != nil {
			return res, err
		}
		res.Images = append(res.Images, Built{Platform: platform, Digest: digest, LayerBytes: lsize, BinaryBytes: size})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}},
		})
	}
	if res.Digest, err = idx.Digest(); err != nil {
		return res, err
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return res, err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return res, fmt.Errorf("write layout: %w", err)
	}
	// Both names: containerd's import reads io.containerd.image.name,
	// podman and skopeo the OCI ref name.
	ref := Name + ":" + cfg.Version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return res, fmt.Errorf("write layout: %w", err)
	}
	if res.ArchiveBytes, err = tarDir(layoutDir, archive, cfg.Created); err != nil {
		return res, fmt.Errorf("write archive: %w", err)
	}
	return res, nil
}

// buildBinaries builds bpfperfd and bpfperf for arch into dir and returns
// them as the layer's files, with their total size.
func buildBinaries(cfg Config, arch, dir string) (files []file, size int64, err error) {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", cfg.Version, cfg.Commit)
	for _, bin := range []string{"bpfperfd", "bpfperf"} {
		out := filepath.Join(dir, bin)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/"+bin)
		cmd.Dir = cfg.Root
		// Static: the image has no libc to link against.
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, 0, fmt.Errorf("build %s for %s: %v\n%s", bin, arch, err, msg)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return nil, 0, err
		}
		files = append(files, file{name: BinDir + "/" + bin, mode: 0o755, data: data})
		size += int64(len(data))
	}
	return files, size, nil
}

// file is one file of the layer.
type file struct {
	name string
	mode int64
	data []byte
}

// platformImage is one platform's image: the binaries in one layer, the
// daemon as its entrypoint.
func platformImage(cfg Config, arch string, files []file) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// The directories first, as a runtime unpacking the layer expects:
	// the binaries', and the daemon's default state and socket
	// directories (as the systemd unit's StateDirectory and
	// RuntimeDirectory), where a pod mounts its own.
	dirs := []struct {
		name string
		mode int64
	}{
		{"usr/", 0o755}, {"usr/local/", 0o755}, {BinDir + "/", 0o755},
		{"var/", 0o755}, {"var/lib/", 0o755}, {StateDir + "/", 0o700},
		{"run/", 0o755}, {SocketDir + "/", 0o750},
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d.name, Typeflag: tar.TypeDir, Mode: d.mode, ModTime: cfg.Created}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.data)), ModTime: cfg.Created}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: cfg.Created}, CreatedBy: "bpfperf internal/image: bpfperfd and bpfperf, static",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: cfg.Created}
	cf.Config.Entrypoint = []string{"/" + BinDir + "/bpfperfd"}
	cf.Config.Cmd = []string{"--state-dir", "/" + StateDir, "--socket", "/" + SocketDir + "/api.sock"}
	cf.Config.Env = []string{"PATH=/" + BinDir}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "bpfperf",
		"org.opencontainers.image.version":  cfg.Version,
		"org.opencontainers.image.revision": cfg.Commit,
		"org.opencontainers.image.source":   "https://github.com/bpfperf/bpfperf",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: cfg.Created})
}

// tarDir writes dir's files into a tar at path, in a fixed order with
// fixed times, and returns its size.
func tarDir(dir, path string, at time.Time) (int64, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(names)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		st, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: at}
		if st.IsDir() {
			h.Name, h.Typeflag, h.Mode = h.Name+"/", tar.TypeDir, 0o755
			if err := tw.WriteHeader(h); err != nil {
				return 0, err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return 0, err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		if _, err := tw.Write(data); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), f.Close()
}
