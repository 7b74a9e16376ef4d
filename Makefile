# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
JOBS ?= 2
# the CPU build of PyTorch for the optional clusterkit.torch tests (a bare `torch` pulls CUDA)
TORCH ?= torch==2.13.0

.PHONY: demo test lint bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check '$(TORCH)'
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench,torch,dask,qnn,openvino]'
	@command -v dot >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq graphviz; } \
	  >/dev/null 2>&1 || echo "note: Graphviz's dot is not installed; SVG output is unavailable"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m clusterkit.cli.demo

# ruff and mypy on clusterkit/ and selectors/, settings in pyproject.toml: a style or type error
# fails `make test`
lint: $(STAMP)
	$(PY) tools/lint.py

test: $(STAMP) lint
	$(PY) -m pytest -q -n $(JOBS) -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/run.py --out bench

clean:
	rm -rf $(VENV) build *.egg-info bench/*.json
