# Causeway: `make demo`, `make test`, `make bench`. Each target installs what
# is missing (Debian packages, the Python virtual environment), configures and
# builds first, so a fresh machine needs nothing by hand.

BUILD ?= build
JOBS ?= 2
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := cmake ninja-build g++ clang libclang-rt-14-dev ccache \
                libeigen3-dev liblapack-dev libabsl-dev libgtest-dev libgmock-dev \
                libbenchmark-dev libasio-dev nlohmann-json3-dev python3-venv libgrpc++-dev \
                libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl libssl-dev \
                libgloo-dev libgoogle-perftools-dev libcpp-httplib-dev \
                libsqlite3-dev chromium tmux
# libsqlite3-dev keeps the head's history file (observe/history.h);
# chromium (headless) and tmux are what python/tests/test_operate.py drives
# the web page and `causeway top` with.
# nanobind and scikit-build-core configure the tree and build the Python
# package (python/): BUILD_PY_PACKAGES, installed first. tqdm is
# the training example's progress bar, prometheus_client parses the head's
# /metrics in its test (python/tests/test_operate.py), pathwaysutils
# registers jaxlib's IFRT proxy backend for JAX through `causeway proxy`
# (docs/jax.md), kubernetes-validate checks deploy/k8s against the
# Kubernetes API's schemas, which it bundles, so offline
# (python/tests/test_deploy.py, docs/deploy.md). matplotlib draws the scale
# benchmark's plots as PNG files (bench/scale_bench.py --plot, issue 18).
# orbax-checkpoint (flax needs it too) saves and restores checkpoints through
# the proxy in python/tests/test_proxy.py. ml_dtypes stays at 0.6.0 (jax
# 0.10.2 asks for >= 0.5): 0.7.0's import takes 0.7 s of CPU (it registers
# its ufunc loops through numpy's linear search), half of every JAX
# process's start: with 0.6.0 the whole pytest takes 158 CPU-s instead of
# 205 (BENCHMARKS.md, "Build and `make test`").
BUILD_PY_PACKAGES := nanobind scikit-build-core
PY_PACKAGES := jax==0.10.2 numpy ml_dtypes==0.6.0 pytest tqdm \
               prometheus_client pathwaysutils flax optax orbax-checkpoint \
               kubernetes-validate matplotlib
FUZZ_SECONDS ?= 600

.PHONY: all deps apt-deps build-py-deps py-deps build python test demo bench fuzz \
        sanitize tsan clean

all: build

deps: apt-deps py-deps

# Installs only the Debian packages that are missing.
apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# The packages are compiled to bytecode as they install: where
# PYTHONDONTWRITEBYTECODE is set (it is on this machine kind) every process
# would otherwise compile JAX again as it imports it. PY_PACKAGES install
# with uv (from PyPI, into the venv, pinned like jax: its flags change
# between releases), which takes about half pip's CPU for them (19 s
# against 40, bytecode included) and a quarter of its time. uv reads the
# CA bundle from SSL_CERT_FILE, where pip reads PIP_CERT.
PIP_INSTALL := $(VENV)/bin/pip install -q --disable-pip-version-check

$(VENV)/.build-installed: Makefile
	@command -v python3 >/dev/null || $(MAKE) apt-deps
	python3 -m venv $(VENV)
	$(PIP_INSTALL) uv==0.13.10 $(BUILD_PY_PACKAGES)
	touch $@

$(VENV)/.installed: $(VENV)/.build-installed
	$(VENV)/bin/uv pip install -q --python $(VENV)/bin/python --compile-bytecode \
	  $(PY_PACKAGES)
	touch $@

build-py-deps: $(VENV)/.build-installed
py-deps: $(VENV)/.installed

# The venv's Python has nanobind, for the extension built in the same tree.
$(BUILD)/build.ninja: apt-deps build-py-deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null

build: apt-deps py-deps $(BUILD)/build.ninja
	ninja -C $(BUILD) -j$(JOBS) all benchmarks
	$(MAKE) python

# The `causeway` Python package installed into .venv: scikit-build-core
# takes $(BUILD) as its build directory, where the extension is already
# built with everything else, so it compiles nothing again.
python: build-py-deps $(BUILD)/build.ninja
	$(PIP_INSTALL) --no-build-isolation --no-deps \
	  --config-settings=build-dir=$(abspath $(BUILD)) ./python

# The Python packages (py-deps) install beside the first part of the build,
# and pytest runs beside the rest of the build and ctest, as soon as what
# it needs is built (tools/make_test.sh says why). ctest's tests mostly wait
# (on processes, sockets, timeouts), so more of them run at once than
# there are cores.
CTEST_JOBS ?= 4
test: apt-deps $(BUILD)/build.ninja
	./tools/make_test.sh $(BUILD) $(JOBS) $(CTEST_JOBS)

demo: deps build
	./examples/run_demo.sh $(BUILD)

bench: deps build
	./bench/run_bench.sh $(BUILD)

# libFuzzer (clang): FUZZER=hlo_parser (default), evaluator, spmd,
# data_plane, gloo_mesh or proxy_session; FUZZ_SECONDS=600 by default; one
# job, one worker. See fuzz/README.md.
FUZZER ?= hlo_parser
# A fuzzer's own dictionary where it has one.
FUZZ_DICT = $(or $(wildcard fuzz/$(FUZZER).dict),fuzz/hlo_parser.dict)
# The executors' seeds are whole programs, longer than parser inputs (and
# the proxy's, sessions with programs in them); the multi-partition ones
# longest.
FUZZ_MAX_LEN = $(if $(filter evaluator proxy_session,$(FUZZER)),16384,$(if $(filter spmd,$(FUZZER)),32768,4096))
fuzz: apt-deps
	cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCAUSEWAY_FUZZ=ON >/dev/null
	ninja -C $(BUILD)-fuzz -j$(JOBS) $(FUZZER)_fuzzer
	mkdir -p fuzz-out/$(FUZZER)
	$(BUILD)-fuzz/bin/$(FUZZER)_fuzzer -max_total_time=$(FUZZ_SECONDS) \
	  -max_len=$(FUZZ_MAX_LEN) -dict=$(FUZZ_DICT) -timeout=60 \
	  -artifact_prefix=fuzz-out/$(FUZZER)- \
	  fuzz-out/$(FUZZER) fuzz/$(FUZZER)_corpus

# Every C++ test under AddressSanitizer (with leak checking) and
# UndefinedBehaviorSanitizer, built with clang in $(BUILD)-sanitize; then
# the runtime's and client's tests (the ones with threads) under
# ThreadSanitizer in $(BUILD)-tsan, which also checks the lock order of
# every absl::Mutex (docs/async.md).
TSAN_RUN_OPTIONS := second_deadlock_stack=1 \
  suppressions=$(CURDIR)/tests/tsan/suppressions.txt
sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCAUSEWAY_SANITIZE=ON >/dev/null
	ninja -C $(BUILD)-sanitize -j$(JOBS)
	cd $(BUILD)-sanitize && ctest -j$(JOBS) --output-on-failure
	$(MAKE) tsan

tsan: apt-deps
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DCAUSEWAY_TSAN=ON >/dev/null
	ninja -C $(BUILD)-tsan -j$(JOBS)
	cd $(BUILD)-tsan && TSAN_OPTIONS="$(TSAN_RUN_OPTIONS)" \
	  ctest -j$(JOBS) --output-on-failure

clean:
	rm -rf $(BUILD) $(BUILD)-fuzz $(BUILD)-sanitize $(BUILD)-tsan build-python
