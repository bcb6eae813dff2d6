// The control-plane suite's sandbox program (its pods' pause container): it waits for a
// signal. Built by the suite with the Go that builds its peers; no module, no network.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
