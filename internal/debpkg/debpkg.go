// Package debpkg installs the Debian packages a test harness needs, once
// per host: test binaries of several packages may ask at the same time,
// and two apt-gets fail on dpkg's lock.
package debpkg

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// lockPath serializes the harnesses' apt-get calls across processes. The
// name predates this package (internal/vmtest had it): keep it, so a test
// binary built from an older tree still takes the same lock.
const lockPath = "/tmp/bpfperf-vmtest-apt.lock"

// Lock takes the harnesses' apt lock, waiting for another process that
// holds it, and returns its release.
func Lock() (func(), error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apt lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("apt lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// Missing returns the packages of pkgs that dpkg does not list as
// installed.
func Missing(pkgs ...string) []string {
	var missing []string
	for _, p := range pkgs {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	return missing
}

// Ensure installs the packages of pkgs that are missing, for what (a
// harness's name, in the error a non-root caller gets). It does nothing
// when all are installed.
func Ensure(what string, pkgs ...string) error {
	unlock, err := Lock()
	if err != nil {
		return err
	}
	defer unlock()
	missing := Missing(pkgs...)
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs %s: run sudo apt-get install %s", what, strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	if err := Apt("update", "-qq"); err != nil {
		return err
	}
	return Apt(append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)...)
}

// Apt runs apt-get with args. It waits up to ten minutes for dpkg's own
// lock, which an apt-get outside the harnesses (make deps, a person) may
// hold.
func Apt(args ...string) error {
	cmd := exec.Command("apt-get", append([]string{"-o", "DPkg::Lock::Timeout=600"}, args...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}
