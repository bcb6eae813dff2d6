# Developer and CI entry points. `make test` is the test command CI runs.
CARGO ?= cargo
# The shipped binary: glibc 2.26 (Amazon Linux 2) via cargo-zigbuild, for x86_64 and, with
# TARGET=aarch64-unknown-linux-gnu, Graviton (same glibc floor). TARGETS: what package-all and
# check-package build.
TARGET ?= x86_64-unknown-linux-gnu
TARGETS ?= x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu
GLIBC ?= 2.26
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
BIN := $(TARGET_DIR)/$(TARGET)/release/eks-nodeinit
# A binary of another architecture runs under qemu-user (qemu-aarch64-static, with the arm64
# glibc from libc6:arm64: .ci/emulator).
TARGET_ARCH := $(firstword $(subst -, ,$(TARGET)))
RUN := $(if $(filter $(shell uname -m),$(TARGET_ARCH)),,qemu-$(TARGET_ARCH)-static)

.PHONY: demo build build-all package-built test lint deps peers peers-k8s control-plane bench-smoke check-unit e2e e2e-vm e2e-vm-deps assets package package-all check-package check-glibc test-aarch64 tools fuzz

demo:
	$(CARGO) run -- init --dry-run --config examples/scaler.json --metadata examples/metadata.json --root examples/al2-root

# The real peers the suites talk to (tests/README.md), installed when missing; needs root then.
deps:
	bash .ci/deps

# The same as root; otherwise names what is missing and installs nothing: the suites that need
# it skip with a note (and fail when CI is set).
peers:
	bash .ci/deps --if-root

test: peers
	$(CARGO) test --locked

# Every bench once, on the debug build the tests made (one startup run, small fleets, one pull
# of a small image over loopback and each of the shaping front's two networks): a bench that
# cannot run fails CI. The figures themselves come from `cargo
# bench` on a release build. The pull bench needs root and the peers' containerd and crictl
# (`make peers-k8s`, built in CI by `make control-plane` before this): without them it prints
# SKIP and what is missing, and fails when CI is set. Without SOCI's snapshotter (also
# `make peers-k8s`) only its row is left out, with a SKIP line.
# `cargo test --no-run` (a no-op after `make test`) leaves the binary the tests run at
# target/debug/eks-nodeinit.
bench-smoke: deps
	$(CARGO) test --locked --no-run
	STARTUP_RUNS=1 EKS_NODEINIT_BIN=$(TARGET_DIR)/debug/eks-nodeinit \
	FLEET_SIZES=20 FLEET_SPREADS=0,auto DISCOVERY_SIZES=20 DISCOVERY_SPREADS=0,auto \
	PULL_RUNS=1 PULL_LAYERS=2x1 \
	$(CARGO) test --locked --bench startup --bench fleet --bench discovery --bench pull

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

# The property tests' long run (tests/it/props/; `make test` runs them briefly): FUZZ_CASES
# inputs per target in a release build, about 10 minutes on the 2-core build machine once built
# (docs/reliability.md, "Property tests"). A failure prints the smallest failing input.
FUZZ_CASES ?= 550000

fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release --locked --test it -- props:: --test-threads=1 --nocapture

# The binary end to end against real peers on this host: the suites of tests/it that start one
# (tests/README.md): the strict IMDSv2 server, the scripted EC2 and discovery endpoints, moto, a
# private dbus-daemon, containerd and docker-registry, tinyproxy, update-ca-certificates, kmod; and the
# sample node roots.
PEER_SUITES := node discovery host_resources imds instance_types kernel_modules launch_hook logind_dbus moto pod_capacity \
	proxy registries tagging trust user_data_config warm_pool

e2e: peers
	$(CARGO) test --locked --test it -- $(addsuffix ::,$(PEER_SUITES))

# The control plane's peers, built from upstream's Go modules at the versions tools/peers/*/go.mod
# pin (kubelet and kube-apiserver, containerd 2, aws-iam-authenticator), into a cache keyed by
# those files and the Go version; a second run builds nothing (tools/peers/README.md). Needs Go and
# the module proxy.
peers-k8s:
	bash tools/peers/build

# The agent's node proven by a real kubelet against a real kube-apiserver, etcd and containerd 2,
# its EKS token by the real aws-iam-authenticator (STS and EC2 moto's, behind a TLS front at their
# real names), on loopback in a network namespace of the suite's own (tests/it/control_plane/;
# root). Cargo builds the tests after the peers, never beside them: one big build at a time on 2
# cores.
control-plane: peers peers-k8s
	$(CARGO) test --locked --test it -- --ignored --test-threads=1 control_plane:: accelerators::

# The first boot in a Debian VM under QEMU (root; tests/e2e/vm/README.md): the DEB installed in
# the guest, real systemd, logind, cloud-init and kernel, IMDS and moto forwarded from this host.
# E2E_REQUIRED=1: a missing prerequisite fails instead of skipping.
e2e-vm-deps: deps
	bash .ci/e2e-deps

e2e-vm: package e2e-vm-deps peers-k8s
	E2E_REQUIRED=1 $(CARGO) test --locked --test e2e_vm -- --ignored --nocapture

check-unit: deps
	$(CARGO) test --locked --no-run
	bash .ci/check-unit $(TARGET_DIR)/debug/eks-nodeinit

tools:
	bash .ci/tools $(TARGET)

build: tools
	@start=$$(date +%s); \
	$(CARGO) zigbuild --locked --release --target $(TARGET).$(GLIBC); \
	echo "built $(BIN) in $$(( $$(date +%s) - start )) s, $$(stat -c %s $(BIN)) bytes stripped"

check-glibc: build
	bash .ci/check-glibc $(BIN) $(GLIBC)

# Man pages and completions (the same for every architecture), written by the binary being
# packaged: under its emulator when it is not this machine's architecture.
define ASSETS
	rm -rf target/assets && $(RUN) $(BIN) generate --out target/assets
	gzip -9n target/assets/*.8
endef

# The DEB and the RPM of TARGET; file names carry the architecture (amd64/arm64,
# x86_64/aarch64).
define DEB_RPM
	$(CARGO) deb --no-build --no-strip --target $(TARGET) --output target/packages/
	$(CARGO) generate-rpm --target $(TARGET) --payload-compress xz -o target/packages/
	ls -l target/packages/
endef

assets: build
	$(ASSETS)

package: assets
	$(DEB_RPM)

# The packages of a binary already built (package-all builds every architecture first).
package-built:
	$(ASSETS)
	$(DEB_RPM)

# Every architecture's release binary in one cargo run. The release profile's single codegen
# unit and whole-program LTO leave most of one build on one core; cargo schedules both
# architectures' crates side by side instead. Another architecture's binary is then built again
# if asked for alone (`make build TARGET=aarch64-…`): cargo-zigbuild sets up the host target
# differently when it is not among those asked for, so the build scripts and proc macros, and
# with them every crate, count as changed. CI only asks for all of them at once.
build-all:
	for t in $(TARGETS); do bash .ci/tools $$t || exit 1; done
	@start=$$(date +%s); \
	$(CARGO) zigbuild --locked --release $(foreach t,$(TARGETS),--target $(t).$(GLIBC)); \
	echo "built $(TARGETS) in $$(( $$(date +%s) - start )) s"

# Both architectures: four packages in target/packages/ (emptied first: one version each).
package-all: build-all
	rm -rf target/packages
	for t in $(TARGETS); do $(MAKE) --no-print-directory package-built TARGET=$$t || exit 1; done

check-package: package-all
	for t in $(TARGETS); do bash .ci/check-glibc $(TARGET_DIR)/$$t/release/eks-nodeinit $(GLIBC) || exit 1; done
	bash .ci/check-package $(TARGETS)

# The aarch64 release binary under qemu-user, against the x86_64 one and the golden plans:
# --version, validate of every example, the golden plans, real init runs on temp roots (the
# same files byte for byte), and the node, examples and logging suites (tests/it/same_output.rs).
test-aarch64: deps
	$(MAKE) --no-print-directory build-all TARGETS="x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu"
	bash .ci/test-emulated aarch64-unknown-linux-gnu x86_64-unknown-linux-gnu
