package daemon

import (
	"errors"
	"fmt"

	"github.com/bpfperf/bpfperf/store"
)

// ExitStoreDamaged is bpfperfd's exit status when it refuses a damaged
// store (an error matching store.ErrCorrupt). Restarting cannot help, so the systemd unit lists it in
// RestartPreventExitStatus: no restart loop, one line in the journal.
const ExitStoreDamaged = 65 // EX_DATAERR

// refusedStore turns a store that failed its proof into the one line
// bpfperfd exits with: the file, what is damaged, and what to run.
func refusedStore(path string, err error) error {
	var damage *store.DamageError
	if !errors.As(err, &damage) {
		return err
	}
	return fmt.Errorf("%w; it was left as it was: run `bpfperf store check --file %s` to list the damage, "+
		"`bpfperf store salvage --file %s --to NEW.db` to keep what is readable, or move it aside to start an empty store",
		damage, path, path)
}
