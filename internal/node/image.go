package node

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// File is one file of an image's only layer.
type File struct {
	Name string // path in the image, without the leading slash
	Mode int64
	Data []byte
}

// BuildImage writes an image named by each of refs to a tarball at path,
// as `docker save` would: one layer holding files, its entrypoint
// entrypoint. Nothing is pulled: the image starts from empty.Image.
func BuildImage(path string, refs []string, entrypoint []string, files []File) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	// containerd imports only the host's platform by default: an image
	// without one is not unpacked and the CRI cannot run it.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{Entrypoint: entrypoint}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tags := map[name.Reference]v1.Image{}
	for _, ref := range refs {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image name %s: %w", ref, err)
		}
		tags[tag] = img
	}
	return tarball.MultiRefWriteToFile(path, tags)
}

// ensureImages builds the idle command into PauseImage and IdleImage and
// imports them, unless the CRI has both already (Root outlives a node).
func (n *Node) ensureImages(ctx context.Context) error {
	refs := []string{PauseImage, IdleImage}
	if n.hasImages(ctx, refs) {
		return nil
	}
	dir, err := os.MkdirTemp("", "bpfperf-node-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	idle, err := buildStatic(ctx, dir, "github.com/bpfperf/bpfperf/internal/node/idle")
	if err != nil {
		return err
	}
	tar := filepath.Join(dir, "images.tar")
	if err := BuildImage(tar, refs, []string{"/idle"}, []File{{Name: "idle", Mode: 0o755, Data: idle}}); err != nil {
		return err
	}
	return n.Import(ctx, tar, refs...)
}

// Import imports an image tarball into the CRI's containerd namespace and
// waits until the CRI lists each of refs.
func (n *Node) Import(ctx context.Context, tar string, refs ...string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", Socket, "-n", "k8s.io", "images", "import", tar)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, bytes.TrimSpace(b))
	}
	// The CRI learns of images from containerd's events, a moment later.
	for !n.hasImages(ctx, refs) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cri does not list %v after import", refs)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (n *Node) hasImages(ctx context.Context, refs []string) bool {
	for _, ref := range refs {
		st, err := n.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || st.GetImage() == nil {
			return false
		}
	}
	return true
}

// buildStatic builds the main package pkg (an import path) as a static
// binary and returns its bytes: the image has no libc.
func buildStatic(ctx context.Context, dir, pkg string) ([]byte, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return os.ReadFile(out)
}

// ImportCommand builds the main package pkg (an import path) static and
// imports it as image ref, its one file and entrypoint /NAME, so a test's
// container runs a command of this module (a BPF loader, say). It builds
// again in each process even where the CRI has ref from an earlier run
// (Root outlives a node): that one may be of older code.
func (n *Node) ImportCommand(ctx context.Context, ref, pkg string) error {
	dir, err := os.MkdirTemp("", "bpfperf-node-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildStatic(ctx, dir, pkg)
	if err != nil {
		return err
	}
	name := filepath.Base(pkg)
	tar := filepath.Join(dir, "image.tar")
	if err := BuildImage(tar, []string{ref}, []string{"/" + name}, []File{{Name: name, Mode: 0o755, Data: bin}}); err != nil {
		return err
	}
	return n.Import(ctx, tar, ref)
}
