# bertbench — common entry points. See README.md.
.PHONY: all setup build build-bin build-ci build-asan test test-asan fuzz demo clean

BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

all: build

setup:
	@bash scripts/setup.sh

build:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The bertbench binary alone (no tests): what the demos run, so that a new user's first make demo
# spends its minutes training, not compiling the test suite.
build-bin:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target bertbench

# Release build with -Werror, then every test; then the unit tests again under ASan+UBSan; then
# every fuzz target for FUZZ_SECONDS each.
test: setup
	@$(MAKE) --no-print-directory build BUILD=build CMAKE_ARGS="-DBB_WERROR=ON"
	@cd build && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory fuzz

# Debug info as line tables only (-g1): the sanitizers' stack traces need no more, and it compiles
# faster; the libraries as unity builds too (CMakeLists.txt says why Release does not), at -O1
# (src/CMakeLists.txt).
build-asan:
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DBB_SANITIZE=ON \
	  -DBB_WERROR=ON -DCMAKE_UNITY_BUILD=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)

# Unit tests under sanitizers. Release only: tests whose name contains "Slow" (large numerical
# runs), and the suites of the Python adapters in scripts/ (Intel's launcher and IPEX scripts, the
# PyTorch time-to-train peer), whose code the sanitizers do not see and whose bertbench commands
# are those the other CLI tests run (152 s of the suite's 1,296 s on a 2-core Zen 5).
ASAN_RELEASE_ONLY = Slow|^(IntelLaunchBenchmark|IpexLaunch|IpexQa|IpexSquad|TorchTttPeer)\.
test-asan: build-asan
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E '$(ASAN_RELEASE_ONLY)'

# libFuzzer + ASan + UBSan (clang-14, build-fuzz/): every fuzz/*_fuzz.cpp target for FUZZ_SECONDS
# on a scratch copy of its seed corpus, the structure-aware generators (*_gen) for FUZZ_GEN_SECONDS
# under a tighter memory cap; non-zero exit on a crash, timeout or OOM. docs/fuzzing.md.
FUZZ_SECONDS ?= 20
FUZZ_GEN_SECONDS ?= 5
fuzz:
	@bash scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_GEN_SECONDS)

demo: setup build-bin
	@BUILD=$(BUILD) bash scripts/demo.sh

# Fine-tunes make demo's checkpoint (scripts/demo.sh runs first when there is none) on a small
# SQuAD-format set made from the Brown text, predicts, scores; docs/squad.md, "The demo".
.PHONY: demo-squad
demo-squad: setup build-bin
	@BUILD=$(BUILD) bash scripts/demo-squad.sh

clean:
	rm -rf build build-asan build-fuzz

# bertbench vs PyTorch (default and tuned), interleaved per point; writes docs/PERFORMANCE.md and
# docs/perf/ (resumable). Options: make bench-compare BENCH_ARGS="--models=base --seq_len=512".
.PHONY: bench-compare
BENCH_ARGS ?=
bench-compare: build
	@/usr/bin/python3 scripts/bench-compare.py --bertbench=$(BUILD)/bertbench $(BENCH_ARGS)
