//go:build dimmnet_ofi && race

package main

const raceEnabled = true
