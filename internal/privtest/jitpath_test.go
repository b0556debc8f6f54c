package privtest

import (
	"encoding/binary"
	"strings"
	"testing"
)

func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// The arm64 path walk on hand-encoded images: the executed path, not
// every word (a branch over a word and the words after ret are not run).
func TestPathARM64(t *testing.T) {
	const (
		movX9LR = 0xaa1e03e9 // mov x9, x30
		nop     = 0xd503201f
		movX1   = 0xd2800061 // mov x1, #3
		sub     = 0xd1000421 // sub x1, x1, #1
		cmp     = 0xf100003f // cmp x1, #0
		bneM8   = 0x54ffffc1 // b.ne .-8
		beqP8   = 0x54000040 // b.eq .+8
		bP8     = 0x14000002 // b .+8
		movX0   = 0xd2800000 // mov x0, #0
		ret     = 0xd65f03c0
		bl      = 0x94000000 // bl .
		junk    = 0xffffffff // not an instruction
	)
	for _, c := range []struct {
		name       string
		image      []byte
		path, body int
		err        string
	}{
		{"loop", words(movX9LR, nop, movX1, sub, cmp, bneM8, movX0, ret, junk, junk), 8 + 3*(5-1), 3, ""},
		{"branch over a word", words(movX1, bP8, junk, sub, cmp, bneM8, ret), 6 + 3*4, 3, ""},
		{"forward conditional", words(movX1, beqP8, sub, cmp, bneM8, ret), 0, 0, "forward conditional branch"},
		{"second loop", words(movX1, sub, cmp, bneM8, sub, cmp, bneM8, ret), 0, 0, "second loop"},
		{"call", words(bl, ret), 0, 0, "leaves the image"},
		{"no loop", words(movX0, ret), 0, 0, "no loop"},
		{"no ret", words(movX0, nop), 0, 0, "path leaves"},
		{"junk on the path", words(movX0, junk, ret), 0, 0, "decode 0xffffffff"},
	} {
		path, body, err := pathARM64(c.image, 5)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %d, %d, %v; want an error with %q", c.name, path, body, err, c.err)
			}
			continue
		}
		if err != nil || path != c.path || body != c.body {
			t.Errorf("%s: path %d, body %d, %v; want %d, %d", c.name, path, body, err, c.path, c.body)
		}
	}
}
