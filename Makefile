# Two commands do all set-up on a fresh machine (Python 3.10+ and Node.js/npm are all they need):
#   make book   install, execute every chapter (the published book), build _build/html
#   make test   install, unit tests, then every chapter under nbval (make test-fast: the unit
#               tests that execute no whole chapter, for the inner loop)
# Everything installs into .venv (override with VENV=...); MathJax into _build/mathjax.
# After `make book`, `make browser-test` opens every page in headless Chromium (Debian: chromium).

VENV     ?= .venv
PYTHON   ?= python3
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
# Extra flags for `jupyter-book build` (CI passes "-W -n --keep-going").
BOOKFLAGS ?=
CHAPTERS := $(sort $(wildcard book/*.ipynb))
# `make book` executes BOOK_JOBS chapters at a time (one single-threaded kernel each) before the
# build renders them.  Chapters start longest first, as in this hint (chapters 3, 5 and 6 reuse
# chapter 2's runs, so they start after it; chapter 9 reuses chapters 2 and 5's); the other chapters follow.
BOOK_JOBS  ?= $(shell nproc 2>/dev/null || echo 1)
BOOK_FIRST := book/07_multitask.ipynb book/02_patterns.ipynb book/06_anisotropic.ipynb book/05_optimality.ipynb \
              book/08_preconditioned_convergence.ipynb book/09_phase_diagram.ipynb
EXEC_ORDER := $(foreach f,$(BOOK_FIRST),$(filter $(f),$(CHAPTERS))) $(filter-out $(BOOK_FIRST),$(CHAPTERS))

# MathJax 3, served by the book itself (no network when reading it): the npm package is installed
# here, not committed, and the three parts a page needs are copied to the folder that Sphinx's
# html_extra_path (_config.yml) copies into _build/html.
MATHJAX_PKG   ?= mathjax@3.2.2
MATHJAX_DIR   := _build/mathjax
MATHJAX_OUT   := $(MATHJAX_DIR)/html/_static/mathjax
MATHJAX_STAMP := $(MATHJAX_DIR)/.installed-$(MATHJAX_PKG)
MATHJAX_SRC    = $(MATHJAX_DIR)/npm/node_modules/mathjax/es5

.PHONY: install kernels test test-fast unit nbval nbval-a nbval-b book mathjax browser-test bench gpu-check paper-runs paper-records seeds-check clean clean-cache

install: $(STAMP)

# torch first and pinned: this machine's CPU wheel; anything unpinned would fetch CUDA builds.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[book]"
	@touch $(STAMP)

test: install unit nbval

# The fused kernels compiled into numba's cache once, for this CPU and for AVX2 (haswell) at once,
# before the tests: their worker processes and the chapters' kernels then load them (a second or
# two each) instead of each compiling them again (half a minute to two minutes each).
kernels: install
	@$(PY) -m icl_lib.engine.fused_compile & native=$$!; \
	NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES= $(PY) -m icl_lib.engine.fused_compile; avx2=$$?; \
	wait $$native && exit $$avx2

# The unit tests on every core (pytest-xdist), one OpenMP thread per worker (the workers fill
# the cores; tests of threading set torch's threads themselves; numba keeps its threads, which the
# parallel step's tests need); make test-fast leaves out the tests that execute whole chapters
# (papermill) and the slow end-to-end ones (pyproject's markers) for the inner loop: make test and
# CI run them all, and list the 15 slowest.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
PYTEST   := OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_JOBS)
unit: kernels
	$(PYTEST) --durations=15 tests

test-fast: kernels
	$(PYTEST) -m "not chapters and not slow" tests

# Chapters executed by nbval and by make book record their claims here, per profile; the dashboard
# shows the other profile's recorded verdicts beside the build's own (icl_lib/book/sphinx).
CLAIMS_DIR ?= $(CURDIR)/_build/claims

# nbval in two groups at once on two or more cores, each group's kernels on one thread (OpenMP's
# and numba's): two kernels with a thread per core each run several times faster than with two
# threads each, which wait on each other.  Chapters 7, 8 and 9 in one group; the others in order
# in the other, chapters 3 and 5 after chapter 2, whose runs they read from the run cache (which
# locks a run while one process trains it, so two groups never train it twice).
NBVAL := OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 ICL_CLAIMS_DIR=$(CLAIMS_DIR) $(PY) -m pytest -q --nbval-lax \
         --nbval-cell-timeout=3600 -p no:randomly
NBVAL_A := $(wildcard book/07_*.ipynb book/08_*.ipynb book/09_*.ipynb)
NBVAL_B := $(filter-out $(NBVAL_A),$(CHAPTERS))
nbval: kernels
ifeq ($(TEST_JOBS),1)
	$(NBVAL) $(CHAPTERS)
else
	$(MAKE) --no-print-directory --output-sync=target -j2 nbval-a nbval-b
endif

nbval-a:
	$(NBVAL) $(NBVAL_A)

nbval-b:
	$(NBVAL) $(NBVAL_B)

mathjax: $(MATHJAX_STAMP)

$(MATHJAX_STAMP):
	@command -v npm >/dev/null || { echo "make book needs npm (Node.js) to install MathJax"; exit 1; }
	rm -rf $(MATHJAX_DIR)
	npm install --prefix $(MATHJAX_DIR)/npm --no-save --no-package-lock --no-audit --no-fund --loglevel=error $(MATHJAX_PKG)
	mkdir -p $(MATHJAX_OUT)/output/chtml/fonts $(MATHJAX_OUT)/input/tex
	cp $(MATHJAX_SRC)/tex-mml-chtml.js $(MATHJAX_OUT)/
	cp -R $(MATHJAX_SRC)/output/chtml/fonts/woff-v2 $(MATHJAX_OUT)/output/chtml/fonts/
	cp -R $(MATHJAX_SRC)/input/tex/extensions $(MATHJAX_OUT)/input/tex/
	@touch $@

# `make book` builds the published book: each chapter in the paper profile where the run store
# holds its runs (chapter 8: where its committed record is current), quick otherwise
# (ICL_BOOK_PROFILE=stored, icl_lib/book/execute.py).  ICL_PROFILE=quick|paper builds every
# chapter in that profile instead.  The chapters' execution cache follows both (and the store).
# A new MathJax rebuilds every page (each names its script with a checksum of the file).
BOOK_PROFILE := $(if $(ICL_PROFILE),,ICL_BOOK_PROFILE=$(or $(ICL_BOOK_PROFILE),stored))
book: install mathjax
	@if [ -f _build/html/.buildinfo ] && [ $(MATHJAX_STAMP) -nt _build/html/.buildinfo ]; then \
	  echo "MathJax changed: rebuilding every page"; rm -rf _build/html _build/.doctrees; fi
	@start=$$(date +%s); \
	$(BOOK_PROFILE) ICL_CLAIMS_DIR=$(CLAIMS_DIR) $(PY) -m icl_lib.book.execute --jobs $(BOOK_JOBS) $(EXEC_ORDER) || exit $$?; \
	$(BOOK_PROFILE) ICL_CLAIMS_DIR=$(CLAIMS_DIR) $(VENV)/bin/jupyter-book build . $(BOOKFLAGS) || exit $$?; \
	end=$$(date +%s); \
	$(PY) -m icl_lib.book.timings _build --since $$start; \
	echo "book built in $$((end - start)) s: open _build/html/index.html"

# Every page of _build/html in headless Chromium, offline: typeset maths, loaded figures, no traceback.
# BOOK_SCREENSHOTS: a PNG of each page is saved there.
BOOK_SCREENSHOTS ?= _build/screenshots
browser-test: install
	BOOK_SCREENSHOTS=$(BOOK_SCREENSHOTS) $(PY) -m pytest -q -p no:randomly tests_browser

# Model-steps/s of the engine (eager and fused) against a plain reference, on this machine's CPU;
# the first lines name the CPU and the instruction set the fused kernels were compiled for.
# NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES= make bench: the kernels compiled for AVX2 (Haswell's own
# instruction set), on any x86-64 CPU that has it.
bench: install
	$(PY) -m icl_lib.tools.bench

# Every chapter in quick at three other seeds and one other shape: every FAIL must be one the
# chapter reports (icl_lib/tools/seeds_check.py; about an hour on two cores).
SEEDS_CHECK_OUT ?= _build/seeds-check
seeds-check: install
	$(PY) -m icl_lib.tools.seeds_check --out $(SEEDS_CHECK_OUT)

# On a machine with a CUDA device: CUDA tests, benchmark with and without CUDA graphs, a chapter
# executed on the GPU, a few minutes of store export (.ci/gpu-check).
gpu-check: install
	PYTHON=$(PY) .ci/gpu-check

# On a machine with a CUDA device: train the paper profile's plan (every chapter's 500,000-step
# runs) and export it, with each run's early checkpoint and provenance, into the run store
# (results/paper/, committed): every CPU build then evaluates it (ICL_PROFILE=paper make book).
# The paper profile's run store (results/paper/): every run of the paper plan with its early twin
# and provenance.  `store export` writes each ensemble to the store as it ends and checkpoints the
# ones in training into results/paper/ckpt/; stopped (Ctrl-C) and run again -- also in another
# session, once the checkpoints are committed with the store -- it resumes them.  On a CUDA
# machine: `make paper-runs`.  On a CPU, chapter by chapter, e.g.
#   make paper-runs PAPER_DEVICE=cpu PAPER_MAX_ENSEMBLE=8 PAPER_CHAPTERS=02
# (two single-threaded ensembles of 8 side by side, in two worker processes, on a 2-core machine).
PAPER_DEVICE       ?= cuda
PAPER_MAX_ENSEMBLE ?= 64
PAPER_CHAPTERS     ?=
paper-runs: install
	$(PY) -m icl_lib store export --profile paper --device $(PAPER_DEVICE) --max-ensemble $(PAPER_MAX_ENSEMBLE) \
	  $(if $(PAPER_CHAPTERS),--chapters $(PAPER_CHAPTERS))
	$(PY) -m icl_lib store status --profile paper

# Every chapter's paper profile is recorded and committed (results/records/paper/: its claims and a
# fingerprint of the code that decided them), so that a quick build shows the paper's verdicts
# beside its own.  Chapter 8 trains nothing, so the run store has nothing for it; its paper profile
# (about an hour and a half on one core here) is recorded with its executed notebook, which the
# published book serves while that code is unchanged.  A test fails once a record is stale.
# RECORD=02,03 records some chapters only.
RECORD ?= all
paper-records: install
	$(PY) -m icl_lib record run $(RECORD)
	$(PY) -m icl_lib record status

clean:
	rm -rf _build/html _build/jupyter_execute _build/.doctrees

# Trained runs live in _build/icl_cache (or $$ICL_CACHE_DIR); they survive `make clean`.
clean-cache:
	rm -rf _build/icl_cache
