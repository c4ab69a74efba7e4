#!/usr/bin/env bash
# Rehearse the GPU suite here, before spending device time on it. CI's dry run uses the
# project's own venv; the GPU machine has another: its image's packages (bench/data/
# gpu_image_packages.txt, torch 2.11.0), no Ray or Optuna, and .gpu/ unpacked into /tmp/site.
# This builds a venv with those packages and nothing the image lacks, packs .gpu/ for this
# Python with bench/gpu_pack.sh, unpacks it as the device command does, checks that every torch
# name the code uses exists in the image's torch (CUDA paths included, which the dry run skips),
# and runs every stage's dry run: the GPU plan's two commands (--plan 1, --plan 2) as they run
# there, then fidelity. The first rehearsal found Ray Tune needing pydantic there.
#
# Usage, from the project root: bash bench/gpu_rehearse.sh   (a 6 GB venv; the first run packs
# .gpu/ for this Python, 10-20 minutes on 2 busy cores; later runs reuse both)
# It rehearses the working tree as it is (committed or not), in a copy; it replaces /tmp/site,
# the folder the device command uses. Differences left: this Python (the image's is 3.12) and
# CUDA itself.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
shared=${SHARED:-$root/../shared}
venv=${REHEARSAL_VENV:-/tmp/tuner-gpu-rehearsal-venv}
work=$(mktemp -d /tmp/tuner-gpu-rehearsal.XXXXXX)
image_list="$root/bench/data/gpu_image_packages.txt"
pip_q() { "$venv/bin/python" -m pip -q "$@" 2> >(grep -v "is ignored" >&2); }

echo "== venv like the GPU image: $venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# Versions pinned where the image's are known (KINDS.md's pip list row).
pip_q install torch==2.11.0 torchvision==0.26.0 huggingface_hub==1.33.0 timm pandas pyarrow \
  matplotlib scikit-learn tqdm numpy pytest pytest-timeout psutil msgpack pyyaml requests click \
  filelock protobuf grpcio aiohttp packaging jinja2
# Whatever pip brought that the image does not have goes, so a missing module shows up here.
extra=$(comm -23 \
  <("$venv/bin/python" -m pip list --format=freeze 2>/dev/null | cut -d= -f1 | tr 'A-Z_.' 'a-z--' | sort -u) \
  <(grep -v '^#' "$image_list" | tr 'A-Z_.' 'a-z--' | sort -u) | grep -vx -e pip -e setuptools || true)
[ -z "$extra" ] || { echo "   not on the image, removed: $(echo $extra)"; pip_q uninstall -y $extra; }

echo "== the working tree, packed for this Python, unpacked into /tmp/site"
git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && tar --null -T - -cf -) \
  | tar -C "$work" -xf -
git -C "$work" init -q
py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# The pack (Ray's tree compressed: minutes on 2 cores) is kept beside the venv, keyed by what
# makes it, so a second rehearsal reuses it.
key=$(cat "$root/bench/gpu_pack.sh" "$root/bench/data/gpu_carried_packages.txt" \
  "$shared/gpu/pack.sh" "$shared/gpu/unpack.sh" <(echo "$py") | md5sum | cut -c1-12)
packed="$venv.gpu-$key"
if [ -d "$packed" ]; then
  echo "   .gpu/ reused from $packed"
else
  (cd "$work" && SHARED=$shared bash bench/gpu_pack.sh "$py" | tail -2)
  rm -rf "$venv".gpu-* && cp -r "$work/.gpu" "$packed"
fi
rm -rf "$work/.gpu" && cp -r "$packed" "$work/.gpu"
rm -rf /tmp/site
export PATH="$venv/bin:$PATH"
(cd "$work" && bash .gpu/unpack.sh)

echo "== torch names the code uses, in the image's torch"
cd "$work"
export PYTHONPATH="/tmp/site:$work" PYTHONUNBUFFERED=1
python3 bench/torch_api_check.py tuner bench tests

# The GPU plan's two commands (bench/README.md) as they run there, each with its archive, then
# the one stage outside them: every stage's dry run.
for plan in 1 2; do
  echo "== the GPU plan's command $plan, dry run"
  python3 -m bench.gpu_suite --plan $plan --dry-run --out "$work/plan$plan" \
    --archive "$work/plan$plan.tgz" 2>&1 | tee "$work/plan$plan.log" | tail -4
  echo "   archive: $(du -h "$work/plan$plan.tgz" | cut -f1)"
done
echo "== fidelity, dry run"
python3 -m bench.gpu_suite fidelity --dry-run --out "$work/out" 2>&1 | tee "$work/fidelity.log" \
  | tail -2
echo "rehearsal passed; logs and results in $work"
