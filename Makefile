# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
JOBS ?= 2

.PHONY: demo test bench install clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m clusterkit.cli.demo

test: $(STAMP)
	$(PY) -m pytest -q -n $(JOBS) -p no:cacheprovider

bench: $(STAMP)
	$(PY) benchmarks/run.py --out bench

clean:
	rm -rf $(VENV) build *.egg-info bench/*.json
