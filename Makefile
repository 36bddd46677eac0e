# Two commands do all set-up on a fresh machine (Python 3.10+ is all they need):
#   make book   install, execute every chapter, build _build/html
#   make test   install, unit tests, then every chapter under nbval
# Everything installs into .venv (override with VENV=...).

VENV     ?= .venv
PYTHON   ?= python3
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
# Extra flags for `jupyter-book build` (CI passes "-W -n --keep-going").
BOOKFLAGS ?=
CHAPTERS := $(sort $(wildcard book/*.ipynb))

.PHONY: install test unit nbval book bench clean clean-cache

install: $(STAMP)

# torch first and pinned: this machine's CPU wheel; anything unpinned would fetch CUDA builds.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[book]"
	@touch $(STAMP)

test: install unit nbval

unit: install
	$(PY) -m pytest -q tests

nbval: install
	$(PY) -m pytest -q --nbval-lax --nbval-cell-timeout=3600 -p no:randomly $(CHAPTERS)

book: install
	@start=$$(date +%s); \
	$(VENV)/bin/jupyter-book build . $(BOOKFLAGS) || exit $$?; \
	end=$$(date +%s); \
	$(PY) -m icl_lib.bookstats _build --since $$start; \
	echo "book built in $$((end - start)) s: open _build/html/index.html"

bench: install
	$(PY) -m icl_lib.bench

clean:
	rm -rf _build/html _build/jupyter_execute _build/.doctrees

# Trained runs live in _build/icl_cache (or $$ICL_CACHE_DIR); they survive `make clean`.
clean-cache:
	rm -rf _build/icl_cache
