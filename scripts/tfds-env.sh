#!/usr/bin/env bash
# Cached venv for the RLDS export and its check: tensorflow-cpu + tensorflow-datasets
# + this project (pip install -e ".[rlds]").
#
#   bash scripts/tfds-env.sh        (idempotent; a second run takes well under a second)
#
# TensorFlow is far too heavy for the main .venv that every test run uses (it would
# add ~1 GB and seconds to every import), so test/convert/test_export_rlds.py builds this one
# once (about a minute with a cold pip cache) and runs the export and
# tfds.builder_from_directory() in it. Rebuilt when this script, setup.py or setup.cfg
# change (a stamp file holds their hash). TFDS_PYTHON picks the interpreter (default
# python3.12, else python3; TensorFlow's CPU wheels exist for 3.10 to 3.12).
# Output: one line; the log goes to .cache/tfds-env.log and is printed on failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CACHE="$ROOT/.cache"
VENV="$CACHE/tfds-venv"

# shellcheck source=scripts/python.sh
source "$ROOT/scripts/python.sh"
PY_EXE="$(resolve_python "${TFDS_PYTHON:-$(default_python)}")"

build() {
  rm -rf "$VENV"
  "$PY_EXE" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -e ".[rlds]"
  "$VENV/bin/python" -c 'import tensorflow_datasets as tfds, ortf_ros.convert.rlds_export; print("tfds", tfds.__version__)'
}

cached_venv tfds "$VENV" "$PY_EXE" build
