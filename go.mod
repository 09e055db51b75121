module github.com/dimmnet/dimmnet

go 1.26.8

require (
	github.com/google/gopacket v1.1.19
	golang.org/x/sys v0.49.0
)

require github.com/hanwen/go-fuse/v2 v2.12.1
