# lowtail — `make run` and `make test` do all the set-up a fresh Debian machine needs.
SHELL := /bin/bash
.DEFAULT_GOAL := build

VENV    := .venv
PY      := $(VENV)/bin/python
STAMPS  := .build
# Debian packages the product uses at run time and in tests.
# dpdk-dev: dpdk-testpmd, one of the DuT kinds (tested end to end when installed).
# qemu-system-x86 + busybox-static: the VM DuT and its guest (kernels come from Debian's
# archive at run time: `lowtail vm build`); nftables, openvswitch-switch: those DuT kinds.
APT_RUNTIME := iproute2 zstd procps util-linux dpdk-dev qemu-system-x86 busybox-static nftables openvswitch-switch
# chromium + chromium-driver: the browser test of the report pages (headless, driven by selenium).
APT_TEST    := chromium chromium-driver
# tcpreplay + tcpdump: the Debian-tools baseline of bench/testbed_loop.py.
APT_BENCH   := postgresql tcpreplay tcpdump
RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml $(wildcard Cargo.lock)
PY_SOURCES   := $(shell find python -name '*.py' -o -name '*.sql' 2>/dev/null)

.PHONY: build deps test test-rust test-python lint run bench clean fuzz

$(STAMPS):
	@mkdir -p $(STAMPS)

$(STAMPS)/apt: scripts/ensure-apt.sh Makefile | $(STAMPS)
	@scripts/ensure-apt.sh $(APT_RUNTIME) $(APT_TEST)
	@touch $@

$(STAMPS)/venv: pyproject.toml scripts/pydeps.py | $(STAMPS)
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check --upgrade pip "maturin>=1.5,<2"
	@$(PY) -m pip install -q --disable-pip-version-check $$(python3 scripts/pydeps.py test)
	@touch $@

# The extension module, installed editable into the venv (Python edits need no rebuild).
$(STAMPS)/native: $(STAMPS)/venv $(RUST_SOURCES) | $(STAMPS)
	@VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release --quiet > $(STAMPS)/maturin.log 2>&1 \
	  || { cat $(STAMPS)/maturin.log; exit 1; }
	@touch $@

# The native programs (lowtail-gen, lowtail-fwd, lowtail-noise, ...) go beside the command.
$(STAMPS)/bins: $(STAMPS)/venv $(RUST_SOURCES) | $(STAMPS)
	@cargo build --release --workspace --bins --quiet
	@bins=$$(find target/release -maxdepth 1 -type f -perm -u+x -name 'lowtail-*'); \
	  if [ -n "$$bins" ]; then install -m 755 $$bins $(VENV)/bin/; fi
	@touch $@

deps: $(STAMPS)/apt $(STAMPS)/venv

build: deps $(STAMPS)/native $(STAMPS)/bins ## venv, native module and programs; the command is .venv/bin/lowtail

# Formatters and linters: the tree as committed must pass them (CI fails on drift).
lint: $(STAMPS)/venv
	cargo fmt --all --check
	cd fuzz && cargo fmt --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .

test-rust: deps
	cargo test --workspace --exclude lowtail-py --quiet

test-python: build
	$(PY) -m pytest -q

test: lint test-rust test-python ## everything CI runs

run: build ## the main job on its embedded defaults, ending in an HTML report
	@scripts/demo.sh

bench: build ## speed and memory against the baselines, figures printed side by side
	@scripts/ensure-apt.sh $(APT_BENCH)
	$(PY) bench/analyze_vs_postgres.py
	$(PY) bench/testbed_loop.py

fuzz: ## coverage-guided fuzzing of every parser, FUZZ_SECONDS each (cargo-fuzz on stable; see fuzz/README.md)
	@scripts/fuzz.sh

clean:
	rm -rf $(STAMPS) target $(VENV) python/lowtail/*.so
