package image

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/internal/privtest"
	"github.com/bpfperf/bpfperf/internal/vmtest"
)

// imageBinDir is where TestImageInArm64VM puts the image's binaries in
// the guest.
const imageBinDir = "/image"

// TestImageInArm64VM pulls the image for linux/arm64 (skopeo, as a
// runtime would) and boots the arm64 guest (Debian's arm64 6.1 under
// qemu-system-aarch64) with the daemon and CLI from that image's layer,
// where TestImageBinariesRun runs them: the arm64 image itself, not a
// build beside it, works on an arm64 kernel.
func TestImageInArm64VM(t *testing.T) {
	if vmtest.InVM() {
		t.Skip("the runner, on the host")
	}
	if _, err := exec.LookPath("skopeo"); err != nil {
		privtest.Skip(t, "skopeo not installed (apt-get install skopeo): it pulls the image's arm64 layer")
	}
	archive, _ := testImage(t)
	dest := filepath.Join(t.TempDir(), "pulled-arm64")
	skopeo(t, "copy", "--quiet", "--override-arch", "arm64", "oci-archive:"+archive, "dir:"+dest)
	files := []vmtest.File{{Name: imageBinDir[1:], Mode: fs.ModeDir | 0o755}}
	for _, bin := range []string{"bpfperfd", "bpfperf"} {
		files = append(files, vmtest.File{Name: imageBinDir[1:] + "/" + bin, Mode: 0o755, Data: layerFile(t, dest, BinDir+"/"+bin)})
	}
	vmtest.RunTests(t, vmtest.Config{Arch: vmtest.ARM64, Files: files, Timeout: 3 * time.Minute}, []string{"TestImageBinariesRun"})
}

// TestImageBinariesRun (in the arm64 guest, with the image's binaries):
// bpfperfd starts, bpfperf status answers through its socket, and
// bpfperf progs lists a program this test loaded, by the id and name the
// kernel gave it.
func TestImageBinariesRun(t *testing.T) {
	daemon := filepath.Join(imageBinDir, "bpfperfd")
	if _, err := os.Stat(daemon); err != nil || !vmtest.InVM() {
		t.Skip("runs in the arm64 VM with the image's binaries (TestImageInArm64VM)")
	}
	if runtime.GOARCH != "arm64" {
		t.Fatalf("the guest runs %s, want arm64", runtime.GOARCH)
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "api.sock")
	cmd := exec.Command(daemon, "--state-dir", dir, "--socket", socket, "--interval", "500ms")
	logPath := filepath.Join(dir, "bpfperfd.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	cli := func(args ...string) ([]byte, error) {
		return exec.Command(filepath.Join(imageBinDir, "bpfperf"), append([]string{"--socket", socket}, args...)...).CombinedOutput()
	}

	name := "img_" + strconv.Itoa(os.Getpid())
	prog, err := privtest.LoadSocketFilter(name)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()

	var rows []api.ProgRow
	deadline := time.Now().Add(90 * time.Second)
	for {
		b, err := cli("progs", "--all", "-o", "json")
		if err == nil && json.Unmarshal(b, &rows) == nil && listed(rows, uint32(id), name) {
			break
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("bpfperf progs never listed program %d %s: %v %s\ndaemon:\n%s", id, name, err, b, out)
		}
		time.Sleep(time.Second)
	}
	if b, err := cli("status"); err != nil {
		t.Errorf("bpfperf status: %v\n%s", err, b)
	}
	t.Logf("the arm64 image's bpfperf lists program %d %s among %d", id, name, len(rows))
}

func listed(rows []api.ProgRow, id uint32, name string) bool {
	for _, r := range rows {
		if r.ID == id && r.Name == name {
			return true
		}
	}
	return false
}
