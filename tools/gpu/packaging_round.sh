#!/bin/bash
# Issue 12 on a GPU machine: the package build (-Dgpu_arch=all) carries kernels for every architecture
# gpu_arch lists (cuobjdump), tempi-info reports the GPU and the build, the gpu suite
# passes with the multi-architecture kernels, and the installed tree links and runs from
# C, C++ and Fortran with the CUDA libraries the packages name.
# Usage: bash tools/gpu/packaging_round.sh [BUILD_DIR]   (default build-packaging)
set -euo pipefail
cd "$(dirname "$0")/../.."
b=${1:-build-packaging}
meson setup "$b" -Dgpu_arch=all >/dev/null 2>&1 || meson setup "$b" -Dgpu_arch=all --reconfigure >/dev/null
ninja -C "$b"
echo "== kernels in the archive (expect sm_75 sm_80 sm_86 sm_89 sm_90 with CUDA 13, and PTX compute_90)"
/usr/local/cuda/bin/cuobjdump --list-elf "$b/pmpi/libtempi_pmpi.a" | grep -o 'sm_[0-9]*' | sort | uniq -c
/usr/local/cuda/bin/cuobjdump --list-ptx "$b/pmpi/libtempi_pmpi.a" | grep -o 'sm_[0-9]*' | sort | uniq -c
echo "== tempi-info"
"$b/tools/tempi-info"
"$b/tools/tempi-info" --check "$b/tools/tempi_halo"
echo "== gpu and install suites"
meson test -C "$b" --suite gpu --suite install --print-errorlogs
