package api

import "errors"

// ErrNoDaemon means nothing answers on the socket.
var ErrNoDaemon = errors.New("no bpfperfd running")

// ErrorAnswer is the body of every non-2xx answer: one line that says what
// went wrong.
type ErrorAnswer struct {
	Error string `json:"error"`
}
