# Developer and CI entry points. `make test` is the test command CI runs.
CARGO ?= cargo

.PHONY: demo build test lint deps check-unit
demo:
	$(CARGO) run -- init --dry-run --config examples/scaler.json --metadata examples/metadata.json --root examples/al2-root

build:
	$(CARGO) build --release --locked

deps:
	bash .ci/deps

test: deps
	$(CARGO) test --locked

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

check-unit: deps
	$(CARGO) build --locked
	bash .ci/check-unit target/debug/eks-nodeinit
