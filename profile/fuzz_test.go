package profile

import (
	"bytes"
	"testing"
)

// FuzzParseData: whatever a user passes to `bpfperf profile diff|merge`
// or `pprof` input either parses or fails with words, and what parses
// yields program shares without a panic.
func FuzzParseData(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("not a profile"))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	p, err := Build(fixtureCapture(), fixtureSymbolizer(f), BuildOptions{})
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseData(b)
		if err != nil {
			return
		}
		_, _ = ProgramShares(p)
		_, _ = ProgramNanos(p)
	})
}
