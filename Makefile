# The commands a new user runs on a fresh Debian 12 machine:
#   make demo   — install missing packages, configure, build, run the main job
#   make test   — the same set-up, build, run the whole suite (ctest)
#   make bench  — the same set-up, build, run the CPU benchmark (BENCH_ARGS=--quick)
BUILD ?= build
BUILD_TYPE ?= Release
RLX_CUDA ?= AUTO
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
# ccache keys objects by paths relative to the build dir, so a clone elsewhere (and the
# pip-install test's copy of the tree) reuses this build's objects.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

# Debian packages the build needs (checked with dpkg; only the missing ones are installed).
DEB_PACKAGES := cmake ninja-build g++ make ccache libgtest-dev libgmock-dev clang-format \
  libopenblas-openmp-dev libdnnl-dev libxbyak-dev libcli11-dev nlohmann-json3-dev \
  ocl-icd-opencl-dev libonnx-dev libprotobuf-dev libonnx-testdata \
  python3-torch python3-torchvision python3-torchaudio python3-numpy gnuplot-nox \
  pybind11-dev python3-pytest python3-onnx libsuitesparse-dev python3-scipy \
  libopenmpi-dev openmpi-bin python3-venv python3-pip python3-setuptools python3-wheel \
  dpkg-dev pkgconf python3-pythran

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps configure build demo demo-dp test asan tsan fuzz bench bench-train bench-compile bench-fusion bench-sparse bench-onnx bench-corpus ort-node corpus format clean

all: build

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES) $(EXTRA_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DRLX_CUDA=$(RLX_CUDA) $(CMAKE_ARGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/rlx-demo

# The demo's GPT trained data-parallel on 2 processes (rlx::dist, OpenMPI).
demo-dp: build
	mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
	  ./$(BUILD)/libs/dist/rlx-demo-dp $(DEMO_DP_STEPS)

test: build ort-node
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Sanitizer builds, each in its own dir (RelWithDebInfo, CUDA off, only the targets they run;
# DEVELOPERS.md). Any report fails its test (-fno-sanitize-recover).
#   make asan — AddressSanitizer + UndefinedBehaviorSanitizer over the core labels
#   make tsan — ThreadSanitizer over the concurrency tests
SAN_LABELS := ir ops runtime onnx passes autodiff cpu fuzz
# One CPU kernel level (native): the sanitizers look for memory errors, not for each level's.
# -O1 -g1 (line tables) everywhere, kernels included: a third of -O2 -g's compile time
# (-O3 kernels with full debug info took 74 minutes for 190 of 297 steps on 2 shared cores).
SAN_CMAKE := -G Ninja -DRLX_MARCH=native -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRLX_CUDA=OFF -DRLX_PYTHON=OFF \
  -DRLX_KERNEL_OPT=-O1 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -g1'
empty :=
space := $(empty) $(empty)
asan: deps
	cmake -S . -B build-asan $(SAN_CMAKE) -DRLX_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS) --target rlx-cli $(addprefix rlx_tests_,$(SAN_LABELS))
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L '^($(subst $(space),|,$(SAN_LABELS)))$$' \
	  -E '^onnx_corpus_'

# OMP_NUM_THREADS=1: libgomp is not built with TSan, which cannot see its thread pool hand
# work over, so parallel regions after the first would report false races; the concurrency
# under test is that of the caller's threads.
tsan: deps
	cmake -S . -B build-tsan $(SAN_CMAKE) -DRLX_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target runtime_concurrency_test
	cd build-tsan && OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -R '^Concurrency\.'

# libFuzzer targets (fuzz/README.md), built with clang under ASan + UBSan in build-fuzz, each
# run for FUZZ_SECONDS; FUZZ_TARGETS picks some.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= onnx text npy safetensors tensor_proto gguf
fuzz: EXTRA_PACKAGES := clang libclang-rt-14-dev
fuzz: deps
	cmake -S . -B build-fuzz $(SAN_CMAKE) -DCMAKE_CXX_COMPILER=clang++ \
	  -DRLX_SANITIZE=fuzzer-no-link,address,undefined -DRLX_FUZZ=ON -DRLX_BUILD_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# CPU kernels against the machine's limits (sgemm, a STREAM-like copy); BENCH_ARGS=--quick.
bench: build
	./$(BUILD)/bench/rlx-bench-cpu $(BENCH_ARGS)

# Elementwise fusion: a 6-op chain on 16M f32, unfused vs fused vs memcpy (BENCH_ARGS=--quick).
bench-fusion: build
	./$(BUILD)/bench/rlx-bench-fusion $(BENCH_ARGS)

# Train-step time of the demo's GPT and a BERT-base layer, rlx vs PyTorch (BENCH_ARGS=--quick).
bench-train: build
	./$(BUILD)/bench/rlx-bench-train $(BENCH_ARGS)

# libs/sparse: CG on a 1M-unknown Poisson matrix vs SciPy, spmv vs copy bandwidth.
bench-sparse: build
	./$(BUILD)/bench/rlx-bench-sparse $(BENCH_ARGS)

# Session::compile time of a GPT-2-small forward graph and train step.
bench-compile: build
	./$(BUILD)/bench/rlx-bench-compile $(BENCH_ARGS)

# The Debian package (cmake/install.cmake): $(BUILD)/rlx_<version>_<arch>.deb, for /usr.
.PHONY: package
package: build
	cmake --build $(BUILD) --target package

format: deps
	git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD)

# rlx against ONNX Runtime 1.30 (npm's onnxruntime-node; installed here on first use, with
# ONNXRUNTIME_NODE_INSTALL=skip so that no binary download is attempted) on every model in
# ../shared/models, 2 threads each.
bench-onnx: build
	@command -v npm >/dev/null || { echo "bench-onnx needs node and npm"; exit 1; }
	@[ -d bench/onnx_vs_ort/node_modules/onnxruntime-node ] || \
	  (cd bench/onnx_vs_ort && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund)
	./$(BUILD)/bench/rlx-bench-onnx ../shared/models $(BENCH_ARGS)

# onnxruntime-node in bench/onnx_vs_ort when missing: the model corpus's references
# (tests/corpus) and bench-onnx's peer. Without npm the corpus tests skip, saying so.
ort-node:
	@if [ ! -d bench/onnx_vs_ort/node_modules/onnxruntime-node ]; then \
	  if command -v npm >/dev/null; then \
	    (cd bench/onnx_vs_ort && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund); \
	  else echo "no npm: onnxruntime-node not installed, the onnx_corpus_* tests skip"; fi; \
	fi

# The model corpus (tests/corpus/make_corpus.py) in $(BUILD)/corpus; quick when it is current.
corpus: ort-node
	/usr/bin/python3 tests/corpus/make_corpus.py $(BUILD)/corpus

# rlx against ONNX Runtime on every model of the corpus, 2 threads each.
bench-corpus: build corpus
	./$(BUILD)/bench/rlx-bench-onnx $(BUILD)/corpus $(BENCH_ARGS)
