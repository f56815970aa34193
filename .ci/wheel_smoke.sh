#!/usr/bin/env bash
# Packaging check (issue 9): build the wheel, install it with its dependencies into a fresh venv,
# and run `codesign --help`, a 2-trial sweep and a replay from a directory outside the checkout.
# A non-editable install must find its data (hw_configs/, sim/) inside the package.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_PROGRESS_BAR=off PIP_DISABLE_PIP_VERSION_CHECK=1

python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
pip install -q build   # sdist, then the wheel from the sdist: MANIFEST.in is tested too
python -m build --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
pip install -q torch==2.13.0   # the README's first step: a CPU torch before anything pulls one
pip install -q "$work"/dist/vta_codesign-*.whl

mkdir "$work/elsewhere"
cd "$work/elsewhere"
cp "$repo/sim/calibration/pynq_resnet18.log" measured.log
set -x
python -c 'import codesign.paths as p, sys; assert "site-packages" in str(p.ROOT), p.ROOT'
codesign --help >/dev/null
codesign sweep --trials 2 --budget 2 --out runs/smoke
test -s runs/smoke/pareto.json
codesign report runs/smoke >/dev/null
codesign replay measured.log | tail -3
set +x
echo "wheel smoke: ok (help, 2-trial sweep, report, replay from outside the checkout)"
