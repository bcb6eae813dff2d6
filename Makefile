# Developer and CI entry points. `make test` is the test command CI runs.
CARGO ?= cargo
# The shipped binary: glibc 2.26 (Amazon Linux 2) via cargo-zigbuild. Graviton builds use
# TARGET=aarch64-unknown-linux-gnu (same glibc floor; not buildable on this x86_64 CI machine).
TARGET ?= x86_64-unknown-linux-gnu
GLIBC ?= 2.26
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
BIN := $(TARGET_DIR)/$(TARGET)/release/eks-nodeinit

.PHONY: demo build test lint deps check-unit e2e e2e-vm e2e-vm-deps assets package check-package check-glibc tools

demo:
	$(CARGO) run -- init --dry-run --config examples/scaler.json --metadata examples/metadata.json --root examples/al2-root

deps:
	bash .ci/deps

test: deps
	$(CARGO) test --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

# The binary end to end against real peers on this host: the IMDSv2 server, a scripted EC2
# endpoint and moto, a private dbus-daemon, sample node roots.
e2e: deps
	$(CARGO) test --locked --test node --test tagging --test moto --test logind_dbus --test imds

# The first boot in a Debian VM under QEMU (root; tests/e2e/vm/README.md): the DEB installed in
# the guest, real systemd, logind, cloud-init and kernel, IMDS and moto forwarded from this host.
# E2E_REQUIRED=1: a missing prerequisite fails instead of skipping.
e2e-vm-deps: deps
	bash .ci/e2e-deps

e2e-vm: package e2e-vm-deps
	E2E_REQUIRED=1 $(CARGO) test --locked --test e2e_vm -- --ignored --nocapture

check-unit: deps
	$(CARGO) build --locked
	bash .ci/check-unit $(TARGET_DIR)/debug/eks-nodeinit

tools:
	bash .ci/tools

build: tools
	@start=$$(date +%s); \
	$(CARGO) zigbuild --locked --release --target $(TARGET).$(GLIBC); \
	echo "built $(BIN) in $$(( $$(date +%s) - start )) s, $$(stat -c %s $(BIN)) bytes stripped"

check-glibc: build
	bash .ci/check-glibc $(BIN) $(GLIBC)

assets: build
	rm -rf target/assets && $(BIN) generate --out target/assets
	gzip -9n target/assets/*.8

package: assets
	$(CARGO) deb --no-build --no-strip --target $(TARGET) --output target/packages/
	$(CARGO) generate-rpm --target $(TARGET) --payload-compress xz -o target/packages/
	ls -l target/packages/

check-package: package check-glibc
	bash .ci/check-package
