// Package lmmc will hold the LMMC (Link Memory based Communication)
// software interface on top of the driver: link page frames, the page, port
// and link-page-frame tables, and remote paging (issue "LMMC"). It is empty
// until that issue is built; nothing here is claimed done.
package lmmc
