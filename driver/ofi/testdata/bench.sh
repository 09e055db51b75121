#!/bin/sh
# bench.sh DIR: the provider's figures beside libfabric's shm and tcp
# providers and Open MPI's vader and tcp, in one run, medians of 5 (see
# docs/ofi.md). DIR holds libdimmnet-fi.so and the built mpicheck and
# crossing (testdata/*.c).
set -u
dir=$1
port=47650
uptime
pp() { # provider size iters: median usec/xfer of 5 fi_pingpong runs
	for i in 1 2 3 4 5; do
		# only dimmnet's runs name the provider's directory: a baseline
		# with it set would also load the provider (and its Go runtime)
		if [ "$1" = dimmnet ]; then export FI_PROVIDER_PATH=$dir; else unset FI_PROVIDER_PATH; fi
		fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -B $port >/dev/null 2>&1 &
		s=$!
		sleep 1
		fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -P $port 127.0.0.1 2>/dev/null | awk -v s="$2" '$1 != "bytes" {print $7}'
		wait $s
	done | sort -n | sed -n 3p
}
unset FI_PROVIDER_PATH
# ITERS8 (default 100000) round trips per 8-byte run; the tcp provider
# took over a minute per run at load average 13, so a loaded run may
# pass fewer.
for p in ${PROVIDERS:-dimmnet shm tcp}; do
	echo "fi_pingpong $p 8B usec/xfer median: $(pp $p 8 "${ITERS8:-100000}")"
done
for p in ${PROVIDERS:-dimmnet shm tcp}; do
	echo "fi_pingpong $p 1MiB usec/xfer median: $(pp $p 1048576 1000)"
done
mpi="mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none"
echo "mpi dimmnet: $(FI_PROVIDER_PATH=$dir $mpi -x FI_PROVIDER_PATH --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dimmnet $dir/mpicheck bench | grep bench)"
echo "mpi vader:   $($mpi --mca pml ob1 --mca btl self,vader $dir/mpicheck bench | grep bench)"
echo "mpi tcp:     $($mpi --mca pml ob1 --mca btl self,tcp $dir/mpicheck bench | grep bench)"
[ -x "$dir/crossing" ] && DIMMNET_FI_LIB=$dir/libdimmnet-fi.so FI_PROVIDER_PATH=$dir "$dir/crossing"
uptime
