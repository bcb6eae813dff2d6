// nvpci-oracle: NVIDIA's own reader of the PCI sysfs files (go-nvlib's nvpci) over a device
// directory, for the accelerator tests: `nvpci-oracle DIR` prints `gpus=N nvswitches=M`, then a
// line per GPU (`gpu ADDRESS driver=NAME`) and per NVSwitch. Exit 1 when nvpci refuses the tree.
package main

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvlib/pkg/nvpci"
)

// quiet drops nvpci's warnings (a missing IOMMU group, subsystem ids), which say nothing of
// what is counted.
type quiet struct{}

func (quiet) Warningf(string, ...interface{}) {}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nvpci-oracle DEVICES_DIR")
		os.Exit(2)
	}
	lib := nvpci.New(nvpci.WithPCIDevicesRoot(os.Args[1]), nvpci.WithLogger(quiet{}))
	gpus, err := lib.GetGPUs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switches, err := lib.GetNVSwitches()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("gpus=%d nvswitches=%d\n", len(gpus), len(switches))
	for _, g := range gpus {
		fmt.Printf("gpu %s driver=%s\n", g.Address, g.Driver)
	}
	for _, s := range switches {
		fmt.Printf("nvswitch %s driver=%s\n", s.Address, s.Driver)
	}
}
