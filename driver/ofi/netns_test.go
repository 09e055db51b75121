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

func TestFiPingpongAcrossNamespaces(t *testing.T) {
	dir := provider(t)
	need(t, "fi_pingpong")
	h := twoHosts(t)
	before := h.rxPackets(t, 0)
	e := env(t, dir, "FI_DIMMNET_LINK=udp", "FI_DIMMNET_MAX_MSG=262144")
	out := pingpong(t, e, e, []string{"ip", "netns", "exec", h.ns[0]}, []string{"ip", "netns", "exec", h.ns[1]}, h.ip[0],
		"-p", "dimmnet", "-e", "rdm", "-S", "all", "-I", "1000", "-c")
	sizesDone(t, out, "1k", "256k")
	// every size both ways, 1000 times: far more frames than the control
	// connection's handful
	if got := h.rxPackets(t, 0) - before; got < 2*1000*10 {
		t.Errorf("%s received %d packets: the device's frames did not cross the veth", h.veth[0], got)
	}
}

// TestOpenMPIAcrossNamespaces runs the MPI program on two "hosts": mpirun
// in the first namespace, two ranks in each, the second started by an
// rsh agent that enters its namespace; the ranks' frames cross the veth.
func TestOpenMPIAcrossNamespaces(t *testing.T) {
	dir := provider(t)
	bin := mpicheck(t)
	h := twoHosts(t)
	tmp := t.TempDir()
	agent := filepath.Join(tmp, "netns-rsh")
	// the rsh agent enters the other namespace instead of logging in
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nh=$1; shift; exec ip netns exec \"$h\" sh -c \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostfile := filepath.Join(tmp, "hosts")
	if err := os.WriteFile(hostfile, []byte(h.ns[0]+" slots=2\n"+h.ns[1]+" slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := h.rxPackets(t, 1)
	e := env(t, dir, "FI_DIMMNET_LINK=udp")
	args := []string{"netns", "exec", h.ns[0], "mpirun", "-np", "4", "--allow-run-as-root", "--bind-to", "none",
		"--hostfile", hostfile, "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", "10.77.0.0/24",
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "dimmnet",
		"-x", "FI_PROVIDER_PATH", "-x", "FI_DIMMNET_DIR", "-x", "FI_DIMMNET_LINK", "-x", "PATH", bin}
	out := runCmd(t, e, "ip", args...)
	if !strings.Contains(out, "mpicheck: ok 4") {
		t.Fatalf("mpicheck did not pass:\n%s", out)
	}
	if got := h.rxPackets(t, 1) - before; got < 1000 {
		t.Errorf("%s received %d packets: the ranks' frames did not cross the veth", h.veth[1], got)
	}
}
