# The two commands of the README: `make demo` and `make test`. Both set up the
# cached environment first (scripts/setup-env.sh: a venv with the project, a real
# ROS 2 Jazzy from PyPI and the interface packages under ros/ built; seconds when nothing changed).
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/setup-env.sh

demo: setup
	@$(VENV)/bin/ortf demo demo-output --force

lint: setup
	@$(PY) -m ruff check
	@$(PY) -m ruff format --check
	@$(PY) -m mypy

test: lint
	@$(PY) -m pytest

bench: setup
	@$(PY) bench/bench_writer.py
	@$(PY) bench/bench_bag2ortf.py
	@$(PY) bench/bench_playback.py
	@$(PY) bench/bench_live.py
	@$(PY) bench/bench_export.py
	@$(PY) bench/bench_append.py
	@$(PY) bench/bench_fleet.py
	@$(PY) bench/bench_doctor.py
	@$(PY) bench/bench_review.py
	@$(PY) bench/bench_h264.py

clean:
	rm -rf $(VENV) .cache demo-output build install log
