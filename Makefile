# The README's two commands: `make up` runs the system, `make test` passes the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help
LOCAL_ENV := .taskyard/local.env
# Tests use the local services bootstrap made sure of, unless AMQP_URL / DATABASE_URL say otherwise.
TEST_ENV = set -a; [ -f $(LOCAL_ENV) ] && source $(LOCAL_ENV); set +a; \
	export AMQP_URL="$${AMQP_URL:-$${TASKYARD_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}}"; \
	export DATABASE_URL="$${DATABASE_URL:-$$TASKYARD_DB_URL}";
PYTEST_ARGS ?=

.PHONY: help up test test-fast lint check-packages bootstrap

help:
	@echo "make up     run taskyard locally (installs what is missing, starts RabbitMQ/PostgreSQL)"
	@echo "make test   run the whole test suite against real RabbitMQ and PostgreSQL"
	@echo "make lint   ruff"

bootstrap:
	@bash scripts/bootstrap.sh

up: bootstrap
	uv sync --locked
	uv run --locked python scripts/up.py

test: bootstrap
	uv sync --locked
	$(TEST_ENV) uv run --locked pytest $(PYTEST_ARGS)

# Unit tests only: no broker or database needed.
test-fast:
	uv run --locked pytest tests/unit $(PYTEST_ARGS)

lint:
	uv run --locked ruff check .
	uv run --locked ruff format --check .

# Each service installs and starts alone, with only its own dependencies (the workspace's known hole is a
# service importing another member's dependency from the shared dev environment).
check-packages:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for spec in taskyard-api:taskyard-api taskyard-api:taskyard-migrate \
	            taskyard-broker-agent:taskyard-broker-agent taskyard-worker:taskyard-worker \
	            taskyard-devllm:taskyard-devllm; do \
	  pkg=$${spec%%:*}; cmd=$${spec##*:}; \
	  echo "== $$pkg alone: $$cmd --help"; \
	  UV_PROJECT_ENVIRONMENT=$$tmp/$$pkg uv sync --locked --no-dev --package $$pkg -q; \
	  $$tmp/$$pkg/bin/$$cmd --help > /dev/null; \
	done; echo "every service installs and starts alone"
