#!/usr/bin/env bash
# The package as a user installs it: build the sdist and, from it, the wheel (python -m build);
# check what they hold (.ci/wheel_contents.py); install the wheel into a fresh virtual
# environment outside the checkout; run --version, spaces and a one-trial smoke_space search
# from there. The fresh environment takes its dependencies from the test environment (a .pth
# file naming its site-packages folders) and installs the wheel alone, so torch is not
# downloaded again. TEST_VENV: the test environment (default: the checkout's .venv, which
# README's test command makes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py="${TEST_VENV:-$root/.venv}/bin/python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH  # nothing from the checkout: the installed wheel alone
step() { echo "+ [${SECONDS} s] $*"; }

step "python -m build (sdist, then the wheel from the sdist)"
"$py" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
wheel=$(echo "$work"/dist/*.whl)
sdist=$(echo "$work"/dist/*.tar.gz)
"$py" .ci/wheel_contents.py "$wheel" "$sdist"

step "a fresh venv outside the checkout, the wheel installed alone"
"$py" -m venv "$work/venv"
new="$work/venv/bin/python"
site=$("$new" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
# The test environment's site-packages folders (those its own .pth files add too), after the
# fresh venv's own: the wheel's tuner comes first, its dependencies from the test environment.
"$py" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("site-packages")))' \
  >"$site/test_venv_dependencies.pth"
"$new" -m pip install -q --no-deps --no-index --ignore-installed "$wheel"

cd "$work"  # neither the checkout nor its packages on the path
test_venv=$("$py" -c 'import sys; print(sys.prefix)')
"$new" - "$root" "$work/venv" "$test_venv" <<'EOF'
import importlib.metadata, importlib.util, sys
from pathlib import Path
import tuner
checkout, venv, test_venv = (Path(p).resolve() for p in sys.argv[1:])
where = Path(tuner.__file__).resolve()
assert where.is_relative_to(venv), f"tuner imported from {where}, not the fresh venv"
# The test environment may live inside the checkout (README's .venv): its site-packages are
# the dependencies; anything else of the checkout on the path is what this check excludes.
from_checkout = [
    p for p in sys.path
    if Path(p or ".").resolve().is_relative_to(checkout)
    and not Path(p).resolve().is_relative_to(test_venv)
]
assert not from_checkout, from_checkout
assert importlib.util.find_spec("search_spaces") is None, "a top-level search_spaces is importable"
version = importlib.metadata.version("train-tuner")
assert version == tuner.__version__, (version, tuner.__version__)
print(f"tuner {version} imported from {where.parent}")
EOF
bin="$work/venv/bin"
step "train-tuner --version; python -m tuner --version"
version=$("$new" -c 'import tuner; print(tuner.__version__)')
for command in "$bin/train-tuner" "$new -m tuner"; do
  said=$($command --version)
  echo "$said"
  [[ $said == *" $version" ]] || { echo "$command --version: not $version" >&2; exit 1; }
done
step "train-tuner spaces"
"$bin/train-tuner" spaces | tee "$work/spaces.txt"
for space in smoke_space vit_space; do
  grep -q "^$space\b" "$work/spaces.txt" || { echo "spaces does not list $space" >&2; exit 1; }
done
step "train-tuner search smoke_space: one trial, no speed probes, re-measurement or effects"
TUNER_CACHE_DIR="$work/cache" "$bin/train-tuner" search smoke_space --num-samples 1 \
  --speed-repeats 0 --remeasure-top 0 --effects-repeats 0 --name wheel \
  --storage "$work/experiments" --reports-dir "$work/reports"
test -s "$work/reports/wheel/report.md" || { echo "the search wrote no report" >&2; exit 1; }
echo "wheel check passed in ${SECONDS} s: $(basename "$wheel")"
