# The two commands: `make crawl` and `make test`. Each installs what it needs.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
SEEDS ?=
URLS ?=
ARGS ?=
comma := ,
empty :=
space := $(empty) $(empty)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: crawl test lint unit compat docs reference wheel egg venv replay-venv redis-server redis-sentinel chromium nginx prometheus bench scale clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.txt -r requirements-dev.txt
	@touch $@

# SimHash and Redis command encoding in C (crawler/dedup/_simhash.c, crawler/redisconn/_resp.c),
# built in place: a C compiler, the Python headers and xxhash.h (Debian's libxxhash-dev) are
# installed with apt-get when missing. Without them the crawler runs the pure-Python versions
# (same results, slower) and says so in its log.
$(BIN)/.native: $(BIN)/.installed crawler/dedup/_simhash.c crawler/redisconn/_resp.c setup.py
	@command -v cc >/dev/null && [ -f /usr/include/xxhash.h ] \
		&& [ -f "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] || { \
		echo "Installing a C compiler, the Python headers and libxxhash-dev with apt-get (the C extensions)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq gcc libc6-dev python3-dev libxxhash-dev >/dev/null; }
	$(BIN)/python -W ignore setup.py -q build_ext --inplace
	@touch $@

# The crawler's bytecode, written whatever PYTHONDONTWRITEBYTECODE says (as pip install does):
# else each worker or Scrapy command compiles its ~150 modules again (~0.25 s of CPU a start).
venv: $(BIN)/.installed $(BIN)/.native
	@$(BIN)/python -m compileall -q crawler

# pywb, the replay server one test runs, in a virtualenv of its own (it pins redis 2.x).
REPLAY := .venv-replay
$(REPLAY)/.installed: requirements-replay.txt
	@[ -x $(REPLAY)/bin/python ] || $(PYTHON) -m venv $(REPLAY)
	$(REPLAY)/bin/pip install --disable-pip-version-check -q -r requirements-replay.txt
	@touch $@

replay-venv: $(REPLAY)/.installed

# redis-server from Debian's package when it is missing.
redis-server:
	@command -v redis-server >/dev/null || { \
		echo "Installing redis-server with apt-get"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server >/dev/null; }

# Debian's redis-sentinel: a test fails a primary over under three sentinels (started by the test).
redis-sentinel: redis-server
	@command -v redis-sentinel >/dev/null || { \
		echo "Installing redis-sentinel with apt-get (the failover test)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-sentinel >/dev/null; }

# Debian's chromium: the crawl renders the hosts that need JavaScript with it (and a test
# renders the crawl report). Playwright drives it; no browser is ever downloaded.
chromium:
	@command -v chromium >/dev/null || { \
		echo "Installing chromium with apt-get (rendering the hosts that need JavaScript)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; }

# Debian's nginx (the light build): a test crawls a real web server with it (gzip, chunked
# answers, its own access log), started by the test on a loopback address, never as a service.
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { \
		echo "Installing nginx-light with apt-get (the test against a real web server)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nginx-light >/dev/null; }

# Debian's prometheus (with promtool): the suite checks deploy/prometheus/ with promtool and scrapes a
# real crawl with it, on loopback, never as a service.
prometheus:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { \
		echo "Installing prometheus with apt-get (the deploy/ checks and the fleet test)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq prometheus >/dev/null; }

## make wheel egg: dist/crawler-<version>-*.whl (pip install it anywhere) and dist/crawler.egg (Scrapyd's
## addversion.json), as docs/fleet.md deploys them
wheel: venv
	$(BIN)/pip wheel -q --no-deps -w dist .

egg: venv
	$(BIN)/scrapyd-deploy --build-egg dist/crawler.egg >/dev/null

## make crawl SEEDS=seeds.txt | make crawl URLS="https://a.example/ https://b.example/"
##   [USER_AGENT="mybot/1.0 (+https://example.org/bot)"] [ARGS="-s NAME=VALUE"]
crawl: venv redis-server chromium
	$(BIN)/scrapy crawl web \
		$(if $(SEEDS),-a seeds=$(SEEDS)) \
		$(if $(strip $(URLS)),-a urls=$(subst $(space),$(comma),$(strip $(URLS)))) \
		$(if $(USER_AGENT),-s "USER_AGENT=$(USER_AGENT)") $(ARGS)

## make test: lint, types, and the whole test suite (starts its own Redis and mock web), in
## TEST_WORKERS processes (pytest-xdist; a test module stays in one process, its fixtures shared)
TEST_WORKERS ?= 3
test: venv replay-venv redis-server redis-sentinel chromium nginx prometheus lint docs
	$(BIN)/python -m pytest -q --timeout=600 -n $(TEST_WORKERS) --dist loadfile tests

## make compat: the add-on's tests on the older Scrapy releases it supports, each in a venv of its own
## (make test runs everything on the newest, requirements.txt's)
COMPAT_SCRAPY ?= 2.17.0 2.18.0
COMPAT_TESTS ?= tests/test_units.py tests/test_addon.py tests/test_addon_e2e.py tests/test_crawl_e2e.py
compat: venv redis-server
	@for version in $(COMPAT_SCRAPY); do \
		env=.venv-scrapy-$$version; \
		[ -x $$env/bin/python ] || $(PYTHON) -m venv $$env; \
		sed "s/^Scrapy==.*/Scrapy==$$version/" requirements.txt > $$env/requirements.txt; \
		$$env/bin/pip install --disable-pip-version-check -q -r $$env/requirements.txt -r requirements-dev.txt \
			|| exit 1; \
		echo "== Scrapy $$version"; \
		$$env/bin/python -m pytest -q --timeout=600 $(COMPAT_TESTS) || exit 1; \
	done

## make docs: the documentation site (build/docs/), strictly: a broken link or anchor fails, and so does a
## generated reference page that is not what its source generates (make reference rewrites them)
REFERENCE := docs/reference/settings.md=crawler.defaults docs/reference/scrapy-settings.md=crawler.scrapysettings
docs: venv
	@for pair in $(REFERENCE); do \
		$(BIN)/python -m $${pair#*=} | cmp -s - $${pair%%=*} \
			|| { echo "$${pair%%=*} is not what $${pair#*=} generates: run make reference"; exit 1; }; \
	done
	$(BIN)/mkdocs build --quiet

## make reference: rewrite the generated reference pages (docs/reference/) from their sources
reference: venv
	@for pair in $(REFERENCE); do $(BIN)/python -m $${pair#*=} > $${pair%%=*}; done

## make unit: the fast lane: lint, types and every test that starts no subprocess (under a minute)
unit: venv lint
	$(BIN)/python -m pytest -q -m "not e2e" tests

lint: venv
	$(BIN)/ruff check crawler tests benchmarks support
	$(BIN)/mypy crawler support

bench: venv redis-server
	$(BIN)/python benchmarks/throughput.py

scale: venv redis-server
	$(BIN)/python benchmarks/scale.py

clean:
	rm -rf $(VENV) $(REPLAY) .venv-scrapy-* .pytest_cache .mypy_cache .ruff_cache
