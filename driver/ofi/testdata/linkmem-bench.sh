#!/bin/sh
# linkmem-bench.sh DIR [ROUNDS]: ppstat's per-round-trip medians for
# buffers in link memory (PPSTAT_LINKMEM=1: no bounce copy) against
# ordinary buffers (PPSTAT_SEND=1: copied, the IPUSH paper's hostcopy),
# both with fi_send, and fi_inject at 8 bytes; the kinds interleaved in
# every round so a loaded machine's swings hit all of them (docs/ofi.md,
# "Link memory"). DIR holds libdimmnet-fi.so and ppstat (testdata/ppstat.c).
set -u
dir=$1
rounds=${2:-5}
export FI_PROVIDER_PATH=$dir
export FI_DIMMNET_DIR=${TMPDIR:-/tmp}/dimmnet-linkmem-bench-$$
uptime
out=$(mktemp)
for r in $(seq "$rounds"); do
	for size in 8 65536 1048576; do
		case $size in 8) it=20000 ;; 65536) it=3000 ;; *) it=300 ;; esac
		kinds="hostcopy linkmem"
		[ "$size" = 8 ] && kinds="inject hostcopy linkmem"
		for k in $kinds; do
			case $k in
			inject) p50=$("$dir/ppstat" dimmnet $it $size | awk '/one-way us/ {print $8}') ;;
			hostcopy) p50=$(PPSTAT_SEND=1 "$dir/ppstat" dimmnet $it $size | awk '/one-way us/ {print $9}') ;;
			linkmem) p50=$(PPSTAT_LINKMEM=1 "$dir/ppstat" dimmnet $it $size | awk '/one-way us/ {print $9}') ;;
			esac
			echo "$size $k $p50" >>"$out"
			echo "round $r: $size B $k one-way median $p50 us"
		done
	done
done
uptime
echo "medians over $rounds rounds (one-way us; MB/s = size / one-way):"
for size in 8 65536 1048576; do
	for k in inject hostcopy linkmem; do
		v=$(awk -v s=$size -v k=$k '$1 == s && $2 == k {print $3}' "$out" | sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}')
		[ -n "$v" ] && echo "$size $k $v $(awk -v s=$size -v v=$v 'BEGIN {printf "%.0f", s / v}')"
	done
done
rm -f "$out"
rm -rf "$FI_DIMMNET_DIR"
