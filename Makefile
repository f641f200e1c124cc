# The two commands of the README: `make demo` and `make test`. Both set up the
# cached environment first (scripts/setup-env.sh: a venv with the project, a real
# ROS 2 from PyPI and the interface packages under ros/ built; seconds when nothing changed).
#
# `make test` runs the whole suite on two interpreters:
#   - on $(PYTHON) (default python3.12, Jazzy's and Kilted's own) in .venv, with ROS 2 Jazzy;
#   - on $(SECOND_PYTHON) (default python3.10, Humble's) in two venvs: the ROS-free suite in
#     one without rclpy (test-core: an rclpy import sneaking into the core fails it), then
#     the tests that need ROS 2 (-m ros) against Jazzy's cp310 wheels (test-ros-second);
#   - and the tests of the ROS nodes against Kilted's wheels (test-kilted);
#   - the tests that need torch (-m torch: the PyTorch dataset's) in a venv with torch's CPU
#     build on Python 3.11 (test-torch: scripts/torch-env.sh; the other venvs skip them).
# `PYTHON=python3.11 make test` picks another main interpreter (a pythonX.Y not on PATH is
# looked for among pyenv's versions).
PYTHON ?= python3.12
SECOND_PYTHON ?= python3.10
KILTED_PYTHON ?= python3.12
VENV := .venv
PY := $(VENV)/bin/python
VENVS := .cache/venvs
CORE_VENV := $(VENVS)/$(notdir $(SECOND_PYTHON:python%=py%))-core
ROS_SECOND_VENV := $(VENVS)/$(notdir $(SECOND_PYTHON:python%=py%))-jazzy
KILTED_VENV := $(VENVS)/$(notdir $(KILTED_PYTHON:python%=py%))-kilted
# mypy reads the code as each supported Python would (its standard library differs).
MYPY_VERSIONS := 3.10 3.11 3.12 3.13
TORCH_VENV := .cache/torch-venv
TORCH_PY := $(TORCH_VENV)/bin/python
# What imports torch, named for it: type-checked in the torch venv (pyproject's mypy `exclude`
# keeps these names out of the main venv's run, which has no torch).
TORCH_TYPED = $(wildcard ortf/torch.py ortf_ros/*/torch_*.py test/*/torch_*.py test/*/test_torch_*.py bench/torch_*.py)

.PHONY: setup torch-env demo test lint lint-torch test-main test-torch test-core test-ros-second test-kilted bench clean

# (PYTHON is passed, not exported: other setup scripts the tests run read it too, e.g.
# ../shared/lerobot-env/setup.sh, whose LeRobot venv needs its own Python 3.11.)
setup:
	@PYTHON=$(PYTHON) bash scripts/setup-env.sh

# torch's CPU build, the project and its test tools (about a minute and 1.7 GB once; then instant)
torch-env:
	@bash scripts/torch-env.sh

demo: setup
	@$(VENV)/bin/ortf demo demo-output --force

lint: setup lint-torch
	@$(PY) -m ruff check
	@$(PY) -m ruff format --check
	@for version in $(MYPY_VERSIONS); do \
	  echo "mypy --python-version $$version"; \
	  $(PY) -m mypy --python-version $$version --cache-dir .mypy_cache || exit 1; \
	done

lint-torch: torch-env
	@for version in $(MYPY_VERSIONS); do \
	  echo "mypy --python-version $$version (torch venv): $(words $(TORCH_TYPED)) files that import torch"; \
	  $(TORCH_PY) -m mypy --python-version $$version --cache-dir .mypy_cache/torch $(TORCH_TYPED) || exit 1; \
	done

test: lint test-main test-torch test-core test-ros-second test-kilted

test-main: setup
	@echo "==> the whole suite on $$($(PY) --version), ROS 2 Jazzy"
	@$(PY) -m pytest

# The tests that import torch (test/support/needs.py marks them), in the torch venv.
test-torch: torch-env
	@echo "==> the tests that need torch on $$($(TORCH_PY) --version), torch $$($(TORCH_PY) -c 'import torch; print(torch.__version__)')"
	@$(TORCH_PY) -m pytest -m torch

# The ROS-free suite, in a venv without rclpy; tests that need ROS 2 skip with one line.
test-core:
	@ROS_WHEELS=none PYTHON=$(SECOND_PYTHON) VENV=$(CORE_VENV) bash scripts/setup-env.sh
	@echo "==> the ROS-free suite on $$($(CORE_VENV)/bin/python --version), no rclpy"
	@$(CORE_VENV)/bin/python -m pytest

test-ros-second:
	@ROS_WHEELS=jazzy PYTHON=$(SECOND_PYTHON) VENV=$(ROS_SECOND_VENV) bash scripts/setup-env.sh
	@echo "==> the tests that need ROS 2 on $$($(ROS_SECOND_VENV)/bin/python --version), ROS 2 Jazzy"
	@$(ROS_SECOND_VENV)/bin/python -m pytest -m ros

test-kilted:
	@ROS_WHEELS=kilted PYTHON=$(KILTED_PYTHON) VENV=$(KILTED_VENV) bash scripts/setup-env.sh
	@echo "==> the tests that need ROS 2 on $$($(KILTED_VENV)/bin/python --version), ROS 2 Kilted"
	@$(KILTED_VENV)/bin/python -m pytest -m ros

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
	@$(PY) bench/bench_import.py
	@$(PY) bench/bench_training.py

clean:
	rm -rf $(VENV) .cache demo-output build install log
