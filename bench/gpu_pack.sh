#!/usr/bin/env bash
# Build .gpu/ for the device machine: ../shared/gpu/pack.sh (stripped Ray, Optuna and their
# missing dependencies) plus the rest of bench/data/gpu_carried_packages.txt, the one list of
# what .gpu/ carries (tests/test_dependencies.py checks the project's dependencies against it).
# Ray 2.60's ray.train (which ray.tune imports) refuses to load without pydantic, and the image's
# package list (the device tool's KINDS.md) has none: bench/gpu_rehearse.sh found it. Use this,
# not ../shared/gpu/pack.sh alone, which carries no pydantic.
#
# Usage, from the project root (a checkout or a git worktree):
#   bash bench/gpu_pack.sh [PYTHON_VERSION]   (default 3.12, the GPU image's Python)
# Then on the GPU machine: bash .gpu/unpack.sh || exit 1; export PYTHONPATH=/tmp/site:$PWD
# SHARED names the folder holding gpu/pack.sh (default: ../shared beside the checkout).
set -euo pipefail
py=${1:-3.12}
root=$(git rev-parse --show-toplevel)
shared=${SHARED:-$root/../shared}
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# pack.sh appends to .git/info/exclude, which is a file's folder only in a plain checkout; a
# worktree's .git is a file, so point it at the exclude file every worktree shares.
exclude=$(git rev-parse --path-format=absolute --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
sed "s#\.git/info/exclude#$exclude#g" "$shared/gpu/pack.sh" > "$tmp/pack.sh"
cp "$shared/gpu/unpack.sh" "$tmp/unpack.sh"
bash "$tmp/pack.sh" "$py"
# What bench/data/gpu_carried_packages.txt names beyond pack.sh's (pydantic with its exact
# pydantic-core pin, its typing helpers). Its typing_extensions replaces the image's: the
# image's version is not known here, and a newer one is backward compatible.
norm() { tr 'A-Z_.' 'a-z--'; }
listed=$(grep -v -e '^#' -e '^$' bench/data/gpu_carried_packages.txt | norm | sort -u)
wheels() { ls .gpu/wheels | sed 's/-[0-9].*//' | norm | sort -u; }
missing=$(comm -23 <(echo "$listed") <( (echo ray; wheels) | sort -u))
if [ -n "$missing" ]; then
  python3 -m pip download -q --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$tmp/extra" $missing
  cp "$tmp"/extra/*.whl .gpu/wheels/
  echo "  added to .gpu/wheels: $(cd "$tmp/extra" && ls | tr '\n' ' ')"
fi
# .gpu/ must carry exactly the list, so the list the tests read is what travels.
drift=$(comm -3 <(echo "$listed") <( (echo ray; wheels) | sort -u) | tr -d '\t' | tr '\n' ' ')
if [ -n "$drift" ]; then
  echo "error: .gpu/ and bench/data/gpu_carried_packages.txt differ in: $drift(add or remove them there)" >&2
  exit 1
fi
du -sh .gpu | sed 's/^/  /'
