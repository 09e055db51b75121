package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hosts are two network namespaces joined by a veth: two "hosts" that
// share /dev/shm and /tmp but no network, so the provider must carry
// their frames over udp across the veth.
type hosts struct {
	ns   [2]string
	ip   [2]string
	veth [2]string
}

func twoHosts(t *testing.T) *hosts {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("network namespaces need root")
	}
	need(t, "ip")
	id := fmt.Sprintf("%d%03d", os.Getpid()%100000, rand.IntN(1000))
	h := &hosts{ns: [2]string{"dnofiA" + id, "dnofiB" + id}, veth: [2]string{"dnoa" + id, "dnob" + id},
		ip: [2]string{"10.77.0.1", "10.77.0.2"}}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, n := range h.ns {
		run("netns", "add", n)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n).Run() })
	}
	run("link", "add", h.veth[0], "type", "veth", "peer", "name", h.veth[1])
	for i := range 2 {
		run("link", "set", h.veth[i], "netns", h.ns[i])
		run("-n", h.ns[i], "addr", "add", h.ip[i]+"/24", "dev", h.veth[i])
		run("-n", h.ns[i], "link", "set", h.veth[i], "up")
		run("-n", h.ns[i], "link", "set", "lo", "up")
	}
	return h
}

// rxPackets is what the veth end in namespace i received so far.
func (h *hosts) rxPackets(t *testing.T, i int) int {
	out, err := exec.Command("ip", "netns", "exec", h.ns[i], "cat", "/sys/class/net/"+h.veth[i]+"/statistics/rx_packets").Output()
	if err != nil {
		t.Fatalf("rx_packets of %s: %v", h.veth[i], err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// udpIn is the UDP datagrams delivered to sockets in host i's namespace
// (/proc/net/snmp is per namespace). The provider's frames are the only
// UDP there: mpirun's control connection and the ranks' wire-up are TCP,
// so unlike the veth's packet count this counts the device's frames alone.
func (h *hosts) udpIn(t *testing.T, i int) int {
	out, err := exec.Command("ip", "netns", "exec", h.ns[i], "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("/proc/net/snmp in %s: %v", h.ns[i], err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for k, name := range names {
			if name == "InDatagrams" && k < len(f) {
				n, _ := strconv.Atoi(f[k])
				return n
			}
		}
	}
	t.Fatalf("no Udp InDatagrams in %s's /proc/net/snmp", h.ns[i])
	return 0
}

func TestFiPingpongAcrossNamespaces(t *testing.T) {
	dir := provider(t)
	need(t, "fi_pingpong")
	h := twoHosts(t)
	before := h.rxPackets(t, 0)
	e := env(t, dir, "FI_DIMMNET_LINK=udp", "FI_DIMMNET_MAX_MSG=262144")
	out := pingpong(t, e, e, []string{"ip", "netns", "exec", h.ns[0]}, []string{"ip", "netns", "exec", h.ns[1]}, h.ip[0],
		"-p", "dimmnet", "-e", "rdm", "-S", "all", "-I", "1000", "-c")
	t.Logf("%s", out)
	sizesDone(t, out, "1k", "256k")
	// every size both ways, 1000 times: far more frames than the control
	// connection's handful
	if got := h.rxPackets(t, 0) - before; got < 2*1000*10 {
		t.Errorf("%s received %d packets: the device's frames did not cross the veth", h.veth[0], got)
	}
}

// mpirunAcross runs bin with args under mpirun in the first namespace,
// slots ranks on each "host", the second's started by an rsh agent that
// enters its namespace instead of logging in.
func mpirunAcross(t *testing.T, h *hosts, dir, bin string, slots int, extra []string, args ...string) string {
	tmp := t.TempDir()
	agent := filepath.Join(tmp, "netns-rsh")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nh=$1; shift; exec ip netns exec \"$h\" sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostfile := filepath.Join(tmp, "hosts")
	if err := os.WriteFile(hostfile, []byte(fmt.Sprintf("%s slots=%d\n%s slots=%d\n", h.ns[0], slots, h.ns[1], slots)), 0o644); err != nil {
		t.Fatal(err)
	}
	e := env(t, dir, "FI_DIMMNET_LINK=udp", "FI_DIMMNET_STATS=1")
	a := []string{"netns", "exec", h.ns[0], "mpirun", "-np", strconv.Itoa(2 * slots), "--allow-run-as-root", "--bind-to", "none",
		"--hostfile", hostfile, "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", "10.77.0.0/24",
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "dimmnet",
		"-x", "FI_PROVIDER_PATH", "-x", "FI_DIMMNET_DIR", "-x", "FI_DIMMNET_LINK", "-x", "FI_DIMMNET_STATS", "-x", "PATH"}
	a = append(append(append(a, extra...), bin), args...)
	return runLauncher(t, e, "ip", a...)
}

// stats sums the provider's counts the ranks printed at close.
func stats(out string) (sends, writes, reads, atomics int) {
	for _, l := range strings.Split(out, "\n") {
		var node, s, r, rv, w, rd, at int
		if _, err := fmt.Sscanf(l, "dimmnet-fi stats: node %d {Sends:%d Rendezvous:%d Recvs:%d RMAWrites:%d RMAReads:%d Atomics:%d}",
			&node, &s, &r, &rv, &w, &rd, &at); err == nil {
			sends, writes, reads, atomics = sends+s, writes+w, reads+rd, atomics+at
		}
	}
	return
}

// TestOpenMPIAcrossNamespaces runs the MPI program on two "hosts", two
// ranks on each; the ranks' frames cross the veth.
func TestOpenMPIAcrossNamespaces(t *testing.T) {
	dir := provider(t)
	bin := mpicheck(t)
	h := twoHosts(t)
	before := h.udpIn(t, 1)
	out := mpirunAcross(t, h, dir, bin, 2, nil)
	if !strings.Contains(out, "mpicheck: ok 4") {
		t.Fatalf("mpicheck did not pass:\n%s", out)
	}
	sends, _, _, _ := stats(out)
	if sends == 0 {
		t.Errorf("the ranks sent nothing through the provider:\n%s", out)
	}
	// Every send between the hosts is at least one device frame over the
	// veth (the two hosts share no shared-memory link), answered by an ACK:
	// host 1 takes in device frames from host 0's two ranks.
	if got := h.udpIn(t, 1) - before; got < 100 {
		t.Errorf("%s took in %d device frames (%d sends in all): the ranks' frames did not cross the veth", h.ns[1], got, sends)
	}
}

// TestOpenMPIOneSidedAcrossNamespaces: MPI_Put, MPI_Get,
// MPI_Fetch_and_op and MPI_Compare_and_swap over osc rdma and btl ofi. Ranks on one host share the
// window's memory directly, so it takes a rank on each of two hosts for
// osc rdma to use the provider's RMA and atomics; the provider's counts
// show it did. One rank per host: two daemons of one hostname share
// Open MPI's session directory in the common /tmp, and osc rdma's
// shared-memory segment for local peers collides there.
func TestOpenMPIOneSidedAcrossNamespaces(t *testing.T) {
	dir := provider(t)
	bin := mpicheck(t)
	h := twoHosts(t)
	out := mpirunAcross(t, h, dir, bin, 1, []string{"--mca", "osc", "rdma", "--mca", "btl", "self,ofi",
		"--mca", "btl_ofi_provider_include", "dimmnet"}, "rma")
	if !strings.Contains(out, "mpicheck: ok 2") {
		t.Fatalf("mpicheck rma did not pass:\n%s", out)
	}
	if _, w, r, a := stats(out); w == 0 || r == 0 || a == 0 {
		t.Errorf("one-sided operations through the provider: %d writes, %d reads, %d atomics; want each > 0\n%s", w, r, a, out)
	}
}
