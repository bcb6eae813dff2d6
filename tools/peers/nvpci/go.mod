module eks-nodeinit/peers/nvpci-oracle

go 1.26.0

require github.com/NVIDIA/go-nvlib v0.13.0
