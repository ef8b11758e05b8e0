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
# openssh-client: the hosts testbed reaches its hosts with ssh.
# suricata: the IPS DuT kind (and the VM guest's IPS); Suricata 7 is in the release's backports
# suite: APT_BACKPORTS are the only packages taken from there (pinned; scripts/ensure-apt.sh).
# Debian's package would start its own suricata service where no policy-rc.d forbids it.
APT_RUNTIME := iproute2 zstd procps util-linux dpdk-dev qemu-system-x86 busybox-static nftables openvswitch-switch \
               openssh-client suricata
# Some machine images carry qemu-utils (qemu-img) from backports: QEMU's system packages must
# then be of the same version (its qemu-utils breaks an older qemu-system-common), so they and
# the firmware they need come from backports too. On an image with the release's qemu-utils,
# nothing of QEMU is taken from there.
QEMU_BACKPORTS := $(shell dpkg-query -W -f='$${Version}' qemu-utils 2>/dev/null | grep -q '~bpo' && \
                    echo qemu-system-x86 qemu-system-common qemu-system-data qemu-utils qemu-block-extra seabios)
APT_BACKPORTS := suricata libhtp2 $(QEMU_BACKPORTS)
# openssh-server: the hosts testbed's tests start real sshd in network namespaces (note that
# Debian starts its own ssh service when the package is installed, unless policy-rc.d forbids);
# tcpdump: the external timestamper of the import tests.
# chromium + chromium-driver: the browser test of the report pages (headless, driven by selenium).
APT_TEST    := openssh-server tcpdump chromium chromium-driver
# tcpreplay + tcpdump: the Debian-tools baseline of bench/testbed_loop.py.
APT_BENCH   := postgresql tcpreplay tcpdump
RUST_SOURCES := $(shell find crates -name '*.rs' -o -name Cargo.toml 2>/dev/null) Cargo.toml $(wildcard Cargo.lock)
PY_SOURCES   := $(shell find python -name '*.py' -o -name '*.sql' 2>/dev/null)
# Every long phase says what it does, how long a first build takes (measured on a 2-core
# machine), and shows a heartbeat with its latest output line; its output is in .build/*.log.
PHASE := scripts/phase.sh
# `make install` links the command here: /usr/local/bin for root (on sudo's PATH), else ~/.local/bin.
BINDIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)
COMPLETIONS ?= $(if $(filter 0,$(shell id -u)),/usr/local/share,$(HOME)/.local/share)

.PHONY: build deps test test-rust test-python lint lint-rust lint-python check run bench clean fuzz install soak

$(STAMPS):
	@mkdir -p $(STAMPS)

$(STAMPS)/apt: scripts/ensure-apt.sh Makefile | $(STAMPS)
	@$(PHASE) $(STAMPS)/apt.log "[1/4] Debian packages: checking (and installing what is missing)" \
	  "a second when present; a first install downloads ~300 MB: minutes" -- scripts/ensure-apt.sh --backports "$(APT_BACKPORTS)" $(APT_RUNTIME)
	@touch $@

$(STAMPS)/apt-test: scripts/ensure-apt.sh Makefile | $(STAMPS)
	@scripts/ensure-apt.sh $(APT_TEST)
	@touch $@

$(STAMPS)/venv: pyproject.toml scripts/pydeps.py | $(STAMPS)
	@$(PHASE) $(STAMPS)/venv.log "[2/4] Python packages into $(VENV)" "first build: about 1.5 min" -- \
	  sh -c 'set -e; test -x $(PY) || { echo "creating the virtual environment $(VENV)"; python3 -m venv $(VENV); }; \
	    echo "pip and maturin: checking for newer versions"; \
	    $(PY) -m pip install --progress-bar off --disable-pip-version-check --upgrade pip "maturin>=1.5,<2"; \
	    echo "the packages of pyproject.toml: resolving"; \
	    $(PY) -m pip install --progress-bar off --disable-pip-version-check $$(python3 scripts/pydeps.py test)'
	@touch $@

# The extension module, installed editable into the venv (Python edits need no rebuild).
$(STAMPS)/native: $(STAMPS)/venv $(RUST_SOURCES) | $(STAMPS)
	@$(PHASE) $(STAMPS)/maturin.log "[3/4] native module lowtail._native (Rust, release build)" \
	  "first build: about 4 min on 2 cores" -- env VIRTUAL_ENV=$(abspath $(VENV)) \
	  PHASE_LAST_STEP="compiling lowtail-py and linking the module (thin LTO over every crate: 1-3 min on 2 cores, no output meanwhile)" \
	  $(VENV)/bin/maturin develop --release
	@touch $@

# The package's bytecode, written once: with PYTHONDONTWRITEBYTECODE set (as on CI and
# in containers) every start would otherwise compile the modules it imports again
# (a tenth of a second of `lowtail analyze`). A stale file is only recompiled in memory.
$(STAMPS)/bytecode: $(STAMPS)/venv $(PY_SOURCES) | $(STAMPS)
	@$(PY) -m compileall -q python/lowtail
	@touch $@

# The native programs (lowtail-gen, lowtail-fwd, lowtail-noise, ...) go beside the command.
$(STAMPS)/bins: $(STAMPS)/venv $(RUST_SOURCES) | $(STAMPS) $(STAMPS)/native
	@$(PHASE) $(STAMPS)/bins.log "[4/4] native programs lowtail-gen, -cap, -fwd, -noise" \
	  "first build: about 1 min more" -- cargo build --release --workspace --bins
	@bins=$$(find target/release -maxdepth 1 -type f -perm -u+x -name 'lowtail-*'); \
	  if [ -n "$$bins" ]; then install -m 755 $$bins $(VENV)/bin/; fi
	@touch $@

deps: $(STAMPS)/apt $(STAMPS)/venv

build: deps $(STAMPS)/native $(STAMPS)/bins $(STAMPS)/bytecode ## venv, native module and programs; the command is .venv/bin/lowtail
	@echo "built: $(VENV)/bin/lowtail $$($(VENV)/bin/lowtail --version | head -n 1 | cut -d' ' -f2-) (make install puts it on PATH)"

# The command (and the native programs beside it, which it finds there) on PATH, with
# shell completion for bash and fish (zsh: see README).
install: build
	@mkdir -p $(BINDIR) $(COMPLETIONS)/bash-completion/completions
	@ln -sf $(abspath $(VENV))/bin/lowtail $(BINDIR)/lowtail
	@$(VENV)/bin/lowtail completion bash > $(COMPLETIONS)/bash-completion/completions/lowtail
	@if [ -d $(COMPLETIONS)/fish ] || command -v fish >/dev/null; then mkdir -p $(COMPLETIONS)/fish/vendor_completions.d; \
	  $(VENV)/bin/lowtail completion fish > $(COMPLETIONS)/fish/vendor_completions.d/lowtail.fish; fi
	@echo "installed $(BINDIR)/lowtail -> $(abspath $(VENV))/bin/lowtail, bash completion in $(COMPLETIONS)/bash-completion/completions"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "note: $(BINDIR) is not on your PATH: add it (export PATH=\"$(BINDIR):\$$PATH\")";; esac

# Formatters and linters: the tree as committed must pass them (CI fails on drift).
lint: lint-rust lint-python

# Without make's job slots: beside pip (make -j2 in `test`) clippy still takes both cores.
lint-rust: | $(STAMPS)
	cargo fmt --all --check
	cd fuzz && cargo fmt --check
	@$(PHASE) $(STAMPS)/clippy.log "clippy over every crate and test" "first time: about 3 min, then seconds" -- \
	  env -u MAKEFLAGS -u MFLAGS cargo clippy --workspace --all-targets -- -D warnings

lint-python: $(STAMPS)/venv
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/mypy

test-rust: deps
	@$(PHASE) $(STAMPS)/cargo-test-build.log "compiling the Rust tests" "first time: about 3 min, then seconds" -- \
	  cargo test --workspace --exclude lowtail-py --no-run
	cargo test --workspace --exclude lowtail-py --quiet

# Every test but the `host` ones, on two workers, a test file to a worker (its testbeds and
# VM boots, built once a file, are not built again on the other worker).
PYTEST_SHARED := $(PY) -m pytest -q -m "not host" -n 2 --dist loadfile --durations=20
# Then, one at a time, those that change the host's settings or hold its cores busy (`host`:
# tune moves every task off a core, a hog pins one, an emulated guest runs Suricata).
PYTEST_HOST   := $(PY) -m pytest -q -m host --durations=20
# Of those, the ones that judge what the kernel trace saw on the DuT's core (explain naming an
# injected task, tracing across hosts): any other task there is a cause to them, so in `test`
# they run first, with the machine to themselves.
TRACE_JUDGED  := tests/explain tests/hosts

# Both parts; the second runs whatever the first gives.
test-python: build $(STAMPS)/apt-test
	@status=0; $(PYTEST_SHARED) || status=$$?; $(PYTEST_HOST) || status=$$?; exit $$status

# Everything CI runs, packed for two cores: clippy beside pip (which mostly waits on the
# network), the type check beside the release build, then scripts/test-suite.sh: the tests
# on two workers, the trace-judged host tests alone, the other host tests, with the Rust
# tests compiled at the lowest priority beside all but the trace-judged ones.
test: ## everything CI runs
	@$(MAKE) --no-print-directory -j2 lint-rust deps
	@$(MAKE) --no-print-directory -j2 lint-python build $(STAMPS)/apt-test
	@PYTEST_SHARED='$(PYTEST_SHARED)' PYTEST_HOST='$(PYTEST_HOST)' TRACE_JUDGED='$(TRACE_JUDGED)' \
	  RUST_LOG=$(STAMPS)/test-rust.log MAKE='$(MAKE)' scripts/test-suite.sh

# The loop to work in: formatters, linters, types and the fast tests (neither `slow` nor
# `root`: no testbed, no VM, no host settings), on two workers; a few minutes on 2 cores.
check: build ## format, lint, types and the fast tests, for development
	cargo fmt --all --check
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not slow and not root" -n 2 $(CHECK_PYTEST)

run: build ## the default experiment, ending in a verdict per DuT, the report's link and what to type next
	@scripts/demo.sh

bench: build ## speed and memory against the baselines, figures printed side by side
	@scripts/ensure-apt.sh $(APT_BENCH)
	$(PY) bench/analyze_vs_postgres.py
	$(PY) bench/testbed_loop.py
	$(PY) bench/trace_overhead.py
	$(PY) bench/ips_rules.py
	$(PY) bench/stated_confidence.py
	$(PY) bench/summary_speed.py

# Not part of `make test`: SOAK_MINUTES (default 12) and SOAK_SEED, as root.
soak: build ## faults at random moments (signals in sweeps, concurrent writers, full disks, damaged databases), ending in a table
	$(PY) scripts/soak.py

fuzz: ## coverage-guided fuzzing of every parser, FUZZ_SECONDS each (cargo-fuzz on stable; see fuzz/README.md)
	@scripts/fuzz.sh

clean:
	rm -rf $(STAMPS) target $(VENV) python/lowtail/*.so
