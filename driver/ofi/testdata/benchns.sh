#!/bin/sh
# benchns.sh DIR: the provider across two "hosts" (two network namespaces
# joined by a veth, as TestFiPingpongAcrossNamespaces makes them) beside
# libfabric's tcp provider and Open MPI's tcp btl over the same veth, in
# one run, medians of 5 (see docs/ofi.md). DIR holds libdimmnet-fi.so and
# the built mpicheck (testdata/mpicheck.c). Needs root; removes what it
# made when it ends.
set -u
dir=$1
id=$$
a=dnbA$id b=dnbB$id va=dnba$id vb=dnbb$id
ipa=10.78.0.1 ipb=10.78.0.2
port=47660
tmp=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
ip netns add "$a" && ip netns add "$b" || exit 1
ip link add "$va" type veth peer name "$vb"
ip link set "$va" netns "$a"
ip link set "$vb" netns "$b"
ip -n "$a" addr add $ipa/24 dev "$va"
ip -n "$b" addr add $ipb/24 dev "$vb"
for n in "$a:$va" "$b:$vb"; do
	ip -n "${n%%:*}" link set "${n#*:}" up
	ip -n "${n%%:*}" link set lo up
done
uptime
pp() { # provider size iters: median usec/xfer of 5 fi_pingpong runs, server in b
	# only dimmnet's runs name the provider's directory: a baseline with
	# it set would also load the provider (and its Go runtime)
	if [ "$1" = dimmnet ]; then
		e="env FI_PROVIDER_PATH=$dir FI_DIMMNET_LINK=udp FI_DIMMNET_DIR=$tmp/shm"
	else
		e="env -u FI_PROVIDER_PATH"
	fi
	for i in 1 2 3 4 5; do
		ip netns exec "$b" $e fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -B $port >/dev/null 2>&1 &
		srv=$!
		sleep 1
		ip netns exec "$a" $e fi_pingpong -p "$1" -e rdm -S "$2" -I "$3" -P $port $ipb 2>/dev/null |
			awk '$1 != "bytes" {print $7}'
		wait $srv
	done | sort -n | sed -n 3p
}
for p in ${PROVIDERS:-dimmnet tcp}; do
	echo "across fi_pingpong $p 8B usec/xfer median: $(pp $p 8 "${ITERS8:-10000}")"
done
for p in ${PROVIDERS:-dimmnet tcp}; do
	echo "across fi_pingpong $p 1MiB usec/xfer median: $(pp $p 1048576 200)"
done
printf '#!/bin/sh\nh=$1; shift; exec ip netns exec "$h" sh -c "$*"\n' >"$tmp/rsh"
chmod +x "$tmp/rsh"
printf '%s slots=1\n%s slots=1\n' "$a" "$b" >"$tmp/hosts"
mpi="ip netns exec $a mpirun -np 2 --allow-run-as-root --bind-to none --hostfile $tmp/hosts --mca plm_rsh_agent $tmp/rsh --mca oob_tcp_if_include 10.78.0.0/24"
echo "across mpi dimmnet: $(FI_PROVIDER_PATH=$dir FI_DIMMNET_LINK=udp FI_DIMMNET_DIR=$tmp/shm $mpi -x FI_PROVIDER_PATH -x FI_DIMMNET_LINK -x FI_DIMMNET_DIR -x PATH --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dimmnet "$dir/mpicheck" bench | grep bench)"
echo "across mpi tcp:     $(env -u FI_PROVIDER_PATH $mpi -x PATH --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include 10.78.0.0/24 "$dir/mpicheck" bench | grep bench)"
uptime
