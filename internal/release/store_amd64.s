//go:build amd64 && !race

#include "textflag.h"

// func Store(addr *uint64, v uint64)
TEXT ·Store(SB), NOSPLIT, $0-16
	MOVQ addr+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
