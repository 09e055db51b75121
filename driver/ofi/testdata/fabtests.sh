#!/bin/sh
# fabtests.sh SRC DIR: builds libfabric's fabtests (every functional/*.c
# and unit/*.c program of the source tree SRC, libfabric's repository at
# tag v1.17.0 or its fabtests directory) and the provider into DIR, runs
# each program over the provider one at a time and prints one line per
# program: name, pass/fail, exit codes, and for a failure its first error
# line. It is the tool behind docs/ofi.md's "fabtests" table, not a CI test
# (CI has no fabtests package to install).
#
# Built without fabtests' autotools: each program is one gcc command with
# common/shared.c and common/hmem*.c (unit programs also unit/common.c),
# -D_GNU_SOURCE and a config.h this script writes (no GPU support),
# linked with -lfabric against the installed libfabric (libfabric-dev).
# Run with FI_PROVIDER_PATH=DIR and FI_DIMMNET_MAX_MSG=262144: a
# functional program that takes an address as a server and a client on
# this host, `-p dimmnet -e rdm -E=PORT` (addresses swapped out of band:
# the provider's addresses are FI_FORMAT_UNSPEC) with a port of its own,
# the client naming 127.0.0.1 and started once the server listens on
# PORT (ss: a loaded machine takes seconds to start a process that loads
# the provider's Go runtime), each side bounded at TIMEOUT seconds
# (default 20; exit code 124 is the bound); one that takes no address
# (fi_loopback) and the unit programs as one process with `-p dimmnet`
# (the functional one also with `-e rdm`).
#
# A result is "pass" when every process exited 0 (and a client printed no
# failed call). DIR/log/NAME.{server,client,out} keep each run's output.
# ONLY="fi_rdm fi_bw" runs only those; ARGS="-c fd" adds arguments to
# every functional program's command; TIMEOUT and PORT (the first port
# is PORT+1, default 47801) may be set.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 SRC DIR" >&2
	exit 2
fi
src=$1
dir=$2
[ -d "$src/fabtests" ] && src=$src/fabtests
if [ ! -f "$src/common/shared.c" ]; then
	echo "$0: $src: no common/shared.c (not libfabric's fabtests source)" >&2
	exit 2
fi
repo=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$dir/inc" "$dir/obj" "$dir/bin" "$dir/log" || exit 1
dir=$(cd "$dir" && pwd)
src=$(cd "$src" && pwd)
timeout=${TIMEOUT:-20}
args=${ARGS:-}
port=${PORT:-47800}

# The provider, as docs/ofi.md builds it.
(cd "$repo" && go build -tags dimmnet_ofi -buildmode=c-shared \
	-ldflags=-extldflags=-Wl,-z,nodelete -o "$dir/libdimmnet-fi.so" ./driver/ofi) || {
	echo "$0: building the provider failed" >&2
	exit 1
}

# What fabtests' configure would find on Linux x86-64 with no GPU runtime.
cat >"$dir/inc/config.h" <<'EOF'
/* written by driver/ofi/testdata/fabtests.sh in place of configure */
#define ENABLE_DEBUG 0
#define HAVE_CLOCK_GETTIME 1
#define HAVE_EPOLL 1
#define HAVE_LIBZE 0
#define HAVE___INT128 1
EOF
cflags="-g -O2 -D_GNU_SOURCE -DHAVE_CONFIG_H -DCONFIG_PATH=\"/nonexistent\" -I$dir/inc -I$src/include -w"
libs="-lfabric -lpthread -ldl -lm"
common=""
for c in "$src"/common/shared.c "$src"/common/hmem*.c "$src"/unit/common.c; do
	o=$dir/obj/$(basename "$(dirname "$c")")_$(basename "$c" .c).o
	gcc $cflags -c -o "$o" "$c" || {
		echo "$0: compiling $c failed" >&2
		exit 1
	}
	case $c in */unit/common.c) unitobj=$o ;; *) common="$common $o" ;; esac
done

built=0
failed=""
for c in "$src"/functional/*.c "$src"/unit/*.c; do
	case $c in */unit/common.c) continue ;; esac
	name=fi_$(basename "$c" .c)
	extra=""
	case $c in */unit/*) extra=$unitobj ;; esac
	if gcc $cflags -o "$dir/bin/$name" "$c" $extra $common $libs 2>"$dir/log/$name.build"; then
		built=$((built + 1))
	else
		failed="$failed $name"
	fi
done
echo "built $built programs${failed:+; failed to build:$failed}"

export FI_PROVIDER_PATH="$dir"
export FI_DIMMNET_MAX_MSG=262144

# firsterr FILE...: the first line that names an error, else the last line.
firsterr() {
	l=$(cat "$@" 2>/dev/null | grep -m1 -i -E 'error|fail|fatal|unable|not supported|no data|unreachable|denied|invalid|usage|-fi_e|^ *[a-z_]+\(\): .*(-[0-9]+|ret)' || true)
	[ -n "$l" ] || l=$(cat "$@" 2>/dev/null | grep -v '^ *$' | tail -n 1)
	[ -n "$l" ] || l="(no output)"
	printf '%s' "$l" | sed "s|$src/||g" | tr -s '\t ' '  ' | cut -c1-200
}

# unitcount FILE: "N pass, N fail, N skipped" from a unit program's output.
unitcount() {
	p=$(grep -c 'PASS!' "$1")
	f=$(grep -c -E 'FAIL:|FATAL:' "$1")
	s=$(grep -c -E 'skipped because|requires unsupported' "$1")
	printf '%s pass, %s fail, %s skipped' "$p" "$f" "$s"
}

failedcall='^[a-z_]+\(\): .*ret=-[0-9]+'
npass=0
nfail=0
printf '%-24s %-6s %s\n' program result detail
for c in "$src"/functional/*.c "$src"/unit/*.c; do
	case $c in */unit/common.c) continue ;; esac
	name=fi_$(basename "$c" .c)
	if [ -n "${ONLY:-}" ]; then
		case " $ONLY " in *" $name "*) ;; *) continue ;; esac
	fi
	bin=$dir/bin/$name
	log=$dir/log/$name
	rm -f "$log.server" "$log.client" "$log.out"
	if [ ! -x "$bin" ]; then
		printf '%-24s %-6s %s\n' "$name" fail "not built: $(firsterr "$log.build")"
		nfail=$((nfail + 1))
		continue
	fi
	case $c in
	*/unit/*)
		timeout "$timeout" "$bin" -p dimmnet >"$log.out" 2>&1
		rc=$?
		detail="rc=$rc; $(unitcount "$log.out")"
		[ $rc -eq 0 ] || detail="$detail; $(firsterr "$log.out")"
		;;
	*)
		if grep -q -E 'ADDR_OPTS|CS_OPTS' "$c"; then
			port=$((port + 1))
			ts=$(date +%s)
			timeout "$timeout" "$bin" -p dimmnet -e rdm -E="$port" $args >"$log.server" 2>&1 &
			spid=$!
			# the client connects once: wait until the server listens
			# (a loaded machine takes seconds to start it) or has gone
			i=0
			while [ $i -lt $((timeout * 10)) ] && kill -0 $spid 2>/dev/null &&
				[ -z "$(ss -Hltn "sport = :$port")" ]; do
				sleep 0.1
				i=$((i + 1))
			done
			# fi_rdm_stress's client needs a job file; its server runs until killed
			cargs=""
			[ "$name" = fi_rdm_stress ] && cargs="-u $src/test_configs/rdm_stress/stress.json"
			timeout "$timeout" "$bin" -p dimmnet -e rdm -E="$port" $args $cargs 127.0.0.1 >"$log.client" 2>&1
			crc=$?
			te=$(date +%s)
			wait $spid
			src_rc=$?
			rc=$((src_rc | crc))
			detail="server=$src_rc client=$crc"
			# each side that failed on its own says why
			se=""
			ce=""
			[ $src_rc -eq 0 ] || [ $src_rc -eq 124 ] || se=$(firsterr "$log.server")
			[ $crc -eq 0 ] || [ $crc -eq 124 ] || ce=$(firsterr "$log.client")
			if [ -n "$se" ] && [ "$se" = "$ce" ]; then
				detail="$detail; both: $se"
			else
				[ -z "$se" ] || detail="$detail; server: $se"
				[ -z "$ce" ] || detail="$detail; client: $ce"
			fi
			# the server started first, so the bound ends it first: a
			# client failing then may only have seen its peer go
			[ $src_rc -ne 124 ] || [ $crc -eq 0 ] || [ $crc -eq 124 ] || [ $((te - ts)) -lt $((timeout - 1)) ] ||
				detail="$detail; after the server reached the ${timeout}s bound"
			[ $src_rc -ne 124 ] || [ $crc -ne 124 ] ||
				detail="$detail; timed out at ${timeout}s; client's last line: $(grep -v '^ *$' "$log.client" | tail -n 1 | tr -s '\t ' '  ' | cut -c1-120)"
			# fabtests print a failed call as "name(): file:line, ret=-N
			# (...)"; fi_rdm_stress's client prints one and exits 0
			if [ $crc -eq 0 ] && grep -q -E "$failedcall" "$log.client"; then
				rc=1
				detail="$detail; client exited 0 after: $(grep -m1 -E "$failedcall" "$log.client" | sed "s|$src/||g" | cut -c1-160)"
			fi
		else
			timeout "$timeout" "$bin" -p dimmnet -e rdm $args >"$log.out" 2>&1
			rc=$?
			detail="rc=$rc"
			[ $rc -ne 124 ] || detail="$detail; timed out at ${timeout}s"
			[ $rc -eq 0 ] || detail="$detail; $(firsterr "$log.out")"
		fi
		;;
	esac
	if [ $rc -eq 0 ]; then
		result=pass
		npass=$((npass + 1))
	else
		result=fail
		nfail=$((nfail + 1))
	fi
	printf '%-24s %-6s %s\n' "$name" "$result" "$detail"
done
echo "$npass pass, $nfail fail"
