package bench

import "errors"

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrNoTestRun: the kernel has no BPF_PROG_TEST_RUN (with timing) for
	// the program's type.
	ErrNoTestRun = errors.New("no test-run support")
	// ErrNotELF: an object file is not an ELF file.
	ErrNotELF = errors.New("not an ELF file")
	// ErrNoProgram: the object has no program of that name.
	ErrNoProgram = errors.New("no such program")
	// ErrMapInit: a map-init file does not fit the object's maps.
	ErrMapInit = errors.New("map-init does not fit")
	// ErrBadConfig: a run parameter is out of range. bpfperfd's bad flags
	// match it too (daemon.ErrBadConfig is this error).
	ErrBadConfig = errors.New("bad configuration")
	// ErrWrongResult: a program returned something other than what the test
	// expects, so its timing would measure the wrong path.
	ErrWrongResult = errors.New("unexpected program result")
	// ErrProfileDir: a --profile directory cannot be made or written in.
	ErrProfileDir = errors.New("unusable profile directory")
)
