module github.com/dimmnet/dimmnet

go 1.26.8

require (
	github.com/google/gopacket v1.1.19
	golang.org/x/sys v0.49.0
)

require github.com/hanwen/go-fuse/v2 v2.12.1

require (
	github.com/pierrec/lz4/v4 v4.1.14 // indirect
	github.com/u-root/mkuimage v0.0.0-20250701161901-6a9871f2e64f // indirect
	github.com/u-root/uio v0.0.0-20240209044354-b3d14b93376a // indirect
)
