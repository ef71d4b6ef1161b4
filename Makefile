# Thin wrapper over CMake for the README's two commands and CI.
#   make run    install dependencies, build, run the default job
#   make test   build and run the whole test suite (CTest)
#   make venv   the pinned light pip packages the tests' Python checks use
#               (tests/requirements-ci.txt) in .venv, which make test then uses
#   make crosscheck  the live cross-checks against transformers and PEFT
#               (PYTHON= a python with torch, transformers, peft, safetensors,
#               tokenizers; the chat export's needs transformers alone)
# the build, the tests (ctest -j) and the fuzz targets run JOBS at a time
JOBS ?= $(shell nproc)
# the project virtualenv (make venv): where it exists, the tests' python3 is its
VENV ?= .venv
TEST_PATH = $(if $(wildcard $(VENV)/bin/python3),PATH="$(abspath $(VENV))/bin:$$PATH")
BUILD ?= build
FUZZ_SECONDS ?= 60

.PHONY: all deps venv build run test test-sanitize fuzz crosscheck clean

all: build

deps:
	bash scripts/install-deps.sh

# the light pip packages the tests' Python checks use (tests/requirements-ci.txt, pinned), in $(VENV)
venv:
	@[ -x $(VENV)/bin/python3 ] || python3 -m venv $(VENV)
	@cmp -s tests/requirements-ci.txt $(VENV)/requirements-ci.txt || \
	  { $(VENV)/bin/pip install -q -r tests/requirements-ci.txt && cp tests/requirements-ci.txt $(VENV)/requirements-ci.txt; }

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: deps build
	./$(BUILD)/titan train

test: build
	cd $(BUILD) && $(TEST_PATH) ctest --output-on-failure -j $(JOBS)

# titan's exports in transformers and its LoRA adapters in PEFT, live (needs torch: not part of make test)
crosscheck: build
	bash tests/crosscheck_hf.sh $(BUILD) .
	bash tests/crosscheck_lora.sh $(BUILD) .
	bash tests/crosscheck_chat_export.sh $(BUILD) .
	bash tests/crosscheck_chat_mask.sh $(BUILD) .
	cd $(BUILD) && $(if $(PYTHON),PATH="$(dir $(abspath $(PYTHON))):$$PATH") TITAN_HF_FINETUNE_TRANSFORMERS=1 \
	  ctest --output-on-failure -R '^cli_hf_finetune$$'

# the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
test-sanitize:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTITAN_SANITIZE=ON >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && $(TEST_PATH) ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

fuzz:
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTITAN_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target $$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$$//' | tr '\n' ' ')
	bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
