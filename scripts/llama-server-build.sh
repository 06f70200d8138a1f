#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (and `llama-bench`) from the llama.cpp tree that the
# llama-cpp-python source distribution vendors (the tree llama-cpp-sys-2 vendors has no server
# sources). Idempotent: the binaries are cached under target/llama-server/bin and the build is
# skipped when they are there for this pinned version. CPU build, Release, static libraries.
#
# Usage: bash scripts/llama-server-build.sh        (prints the server's path at the end)
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
ROOT=target/llama-server
BIN="$ROOT/bin"
STAMP="$BIN/.version"
# A portable x86-64 build (AVX2/FMA/F16C). Not -march=native: on the CI machines the CPU
# advertises AMX, and ggml's AMX code then dies with SIGILL ("illegal instruction") at startup.
FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"

if [ -x "$BIN/llama-server" ] && [ -x "$BIN/llama-bench" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION $FLAGS" ]; then
    echo "$BIN/llama-server (llama-cpp-python $VERSION) is already built"
    exit 0
fi
command -v cmake >/dev/null || { echo "llama-server-build: needs cmake (apt-get install -y cmake)" >&2; exit 1; }
command -v c++ >/dev/null || command -v clang++ >/dev/null || { echo "llama-server-build: needs a C++ compiler (apt-get install -y clang)" >&2; exit 1; }

mkdir -p "$ROOT/dl" "$BIN"
SDIST="$ROOT/dl/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
    PIP=pip; command -v pip >/dev/null || PIP=pip3
    "$PIP" download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$ROOT/dl"
fi
actual=$(sha256sum "$SDIST" | cut -d' ' -f1)
if [ "$actual" != "$SDIST_SHA256" ]; then
    rm -f "$SDIST"
    echo "llama-server-build: $SDIST has sha256 $actual, expected $SDIST_SHA256; deleted it, run again" >&2
    exit 1
fi

SRC="$ROOT/src"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
    rm -rf "$SRC" && mkdir -p "$SRC"
    tar xzf "$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi

start=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$ROOT/build" $FLAGS >/dev/null
cmake --build "$ROOT/build" --config Release -j "$jobs" --target llama-server llama-bench
cp "$ROOT/build/bin/llama-server" "$ROOT/build/bin/llama-bench" "$BIN/"
echo "$VERSION $FLAGS" > "$STAMP"
echo "built $BIN/llama-server and $BIN/llama-bench in $(( $(date +%s) - start )) s"
