// Command ofi is the dimmnet libfabric provider, libdimmnet-fi.so: built
// with -buildmode=c-shared and the dimmnet_ofi build tag (which needs
// libfabric-dev), it is loaded by the system's libfabric from a directory
// named in FI_PROVIDER_PATH, so fi_pingpong, Open MPI and every other
// libfabric program run over dimmnet devices unchanged. docs/ofi.md has the
// build command, the variables and the rules a Go runtime inside someone
// else's process follows.
//
// Without the build tag the package is this file only, so `go vet ./...`
// and `go test ./...` pass on a machine without libfabric's headers; the
// tests build the library themselves and skip, naming what is missing,
// without libfabric-dev, fi_pingpong or mpirun.
package main

// main is never called: a c-shared library's entry points are its
// exported functions (fi_prov_ini).
func main() {}
