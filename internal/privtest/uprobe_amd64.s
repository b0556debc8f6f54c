#include "textflag.h"

// func UprobeTarget(x uint64) uint64
TEXT ·UprobeTarget(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), AX
	INCQ AX
	MOVQ AX, ret+8(FP)
	RET

// func uprobeTargetAddr() uintptr
TEXT ·uprobeTargetAddr(SB), NOSPLIT, $0-8
	LEAQ ·UprobeTarget(SB), AX
	MOVQ AX, ret+0(FP)
	RET
