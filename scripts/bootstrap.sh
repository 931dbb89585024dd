#!/usr/bin/env bash
# Make a fresh Debian/Ubuntu machine ready to run or test taskyard locally:
#   - uv (from PyPI) when missing;
#   - RabbitMQ and PostgreSQL reachable on 127.0.0.1: started when installed but stopped, installed with apt
#     when absent and running as root, otherwise a clear message saying what to do;
#   - a local database role and database `taskyard`, with a generated password kept in .taskyard/local.env
#     (git-ignored), unless TASKYARD_DB_URL / DATABASE_URL already point somewhere;
#   - with --browser (make test): Debian's chromium for the web console's browser tests, installed with apt
#     when missing and running as root; otherwise those tests are skipped, except under CI=true, where a
#     missing browser stops here; and Debian's pgbouncer binary for the PgBouncer store test (skipped when it
#     cannot be installed);
# Idempotent: every step checks first. Prints what it does.
set -euo pipefail

WITH_BROWSER=0
for arg in "$@"; do
  case "$arg" in
    --browser) WITH_BROWSER=1 ;;
    *) echo "usage: scripts/bootstrap.sh [--browser]" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
STATE_DIR=.taskyard
LOCAL_ENV=$STATE_DIR/local.env
mkdir -p "$STATE_DIR"

say() { printf '\033[1mbootstrap:\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31mbootstrap: %s\033[0m\n' "$*" >&2; exit 1; }

port_open() { timeout 1 bash -c "</dev/tcp/127.0.0.1/$1" 2>/dev/null; }

wait_port() { # port name seconds
  local i
  for ((i = 0; i < $3 * 4; i++)); do
    port_open "$1" && return 0
    sleep 0.25
  done
  die "$2 did not open port $1 within $3 s"
}

APT_UPDATED=0
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    return 1
  fi
  if [ "$APT_UPDATED" = 0 ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  say "installing $* with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_uv() {
  if command -v uv >/dev/null; then return; fi
  # A uv installed by an earlier run of this script (the Makefile puts .taskyard/bin on PATH).
  if [ -x "$STATE_DIR/bin/uv" ]; then return; fi
  say "uv not found: installing it from PyPI into $STATE_DIR/uv-venv"
  # A venv of its own: works where the system Python refuses pip installs (PEP 668, Debian 12+).
  if ! python3 -m venv "$STATE_DIR/uv-venv" >/dev/null 2>&1; then
    apt_install python3-venv || die "python3 cannot create a virtual environment: install python3-venv (or uv) and run again"
    python3 -m venv "$STATE_DIR/uv-venv"
  fi
  "$STATE_DIR/uv-venv/bin/python" -m pip install --quiet uv \
    || die "could not install uv from PyPI: install it (https://docs.astral.sh/uv/) and run again"
  mkdir -p "$STATE_DIR/bin"
  ln -sf "$PWD/$STATE_DIR/uv-venv/bin/uv" "$STATE_DIR/bin/uv"
  ln -sf "$PWD/$STATE_DIR/uv-venv/bin/uvx" "$STATE_DIR/bin/uvx"
}

is_local_url() { # a URL whose host is this machine (or unset → default local)
  [ -z "$1" ] && return 0
  case "$1" in *@127.0.0.1*|*@localhost*|*://127.0.0.1*|*://localhost*) return 0 ;; *) return 1 ;; esac
}

ensure_rabbitmq() {
  local url=${TASKYARD_AMQP_URL:-${AMQP_URL:-}}
  if ! is_local_url "$url"; then say "RabbitMQ: using the configured remote broker"; return; fi
  if port_open 5672; then return; fi
  if ! command -v rabbitmq-server >/dev/null; then
    apt_install rabbitmq-server || die "RabbitMQ is not running on 127.0.0.1:5672 and is not installed.
  Install it (Debian/Ubuntu: sudo apt-get install rabbitmq-server) or set TASKYARD_AMQP_URL, then run again."
  fi
  say "starting RabbitMQ"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  wait_port 5672 RabbitMQ 90
}

ensure_postgres() {
  local url=${TASKYARD_DB_URL:-${DATABASE_URL:-}}
  if ! is_local_url "$url"; then say "PostgreSQL: using the configured remote database"; return; fi
  if port_open 5432; then return; fi
  if ! command -v pg_ctlcluster >/dev/null || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    apt_install postgresql || die "PostgreSQL is not running on 127.0.0.1:5432 and is not installed.
  Install it (Debian/Ubuntu: sudo apt-get install postgresql) or set TASKYARD_DB_URL, then run again."
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  say "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null \
    || pg_ctlcluster "$version" main start
  wait_port 5432 PostgreSQL 60
}

as_postgres() { # run psql as the database superuser
  if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
    runuser -u postgres -- psql -v ON_ERROR_STOP=1 -qtA "$@"
  else
    psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -qtA "$@"
  fi
}

ensure_database() {
  if [ -n "${TASKYARD_DB_URL:-${DATABASE_URL:-}}" ]; then return; fi
  if [ -f "$LOCAL_ENV" ] && grep -q '^TASKYARD_DB_URL=' "$LOCAL_ENV"; then return; fi
  command -v psql >/dev/null || die "psql not found: install postgresql-client or set TASKYARD_DB_URL"
  local password
  password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  say "creating the local database role and database 'taskyard'"
  if [ "$(as_postgres -c "SELECT 1 FROM pg_roles WHERE rolname = 'taskyard'")" = 1 ]; then
    as_postgres -c "ALTER ROLE taskyard WITH LOGIN PASSWORD '$password'" >/dev/null
  else
    as_postgres -c "CREATE ROLE taskyard WITH LOGIN PASSWORD '$password'" >/dev/null
  fi
  if [ "$(as_postgres -c "SELECT 1 FROM pg_database WHERE datname = 'taskyard'")" != 1 ]; then
    as_postgres -c "CREATE DATABASE taskyard OWNER taskyard" >/dev/null
  fi
  umask 077
  {
    echo "# Generated by scripts/bootstrap.sh for local runs; never commit this file."
    echo "TASKYARD_DB_URL=postgresql://taskyard:$password@127.0.0.1:5432/taskyard"
  } >"$LOCAL_ENV"
}

has_chromium() {
  [ -n "${TASKYARD_CHROMIUM:-}" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null
}

# The suite runs in two processes, each starting whole clusters (API, broker agent, workers: a pool each):
# the stock 100 connections are too few at peak. Only a local cluster this script manages is changed, once.
ensure_test_connections() {
  local url=${TASKYARD_DB_URL:-${DATABASE_URL:-}}
  if ! is_local_url "$url" || ! command -v pg_ctlcluster >/dev/null; then return; fi
  local current
  current=$(as_postgres -c "SHOW max_connections" 2>/dev/null) || return 0
  if [ -z "$current" ] || [ "$current" -ge 300 ]; then return; fi
  say "PostgreSQL: max_connections $current -> 300 for the test processes (restarting the local cluster)"
  as_postgres -c "ALTER SYSTEM SET max_connections = 300" >/dev/null
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main restart 2>/dev/null \
    || pg_ctlcluster "$version" main restart
  wait_port 5432 PostgreSQL 60
}

ensure_chromium() {
  if has_chromium; then return; fi
  # Debian's package, never Playwright's own download: the tests pass its path as executable_path.
  if apt_install chromium && has_chromium; then return; fi
  local why="chromium is not installed and cannot be installed here (needs root and apt-get)"
  if [ "${CI:-}" = true ]; then
    die "$why: the browser tests cannot run (CI=true)"
  fi
  say "$why: the web console's browser tests will be skipped (sudo apt-get install chromium)"
}

ensure_pgbouncer() {
  # Only its binary: tests/integration/common/test_store_pgbouncer.py starts one of its own per test (the
  # store through a real PgBouncer in transaction mode). Without it that test is skipped, never failed.
  if command -v pgbouncer >/dev/null; then return; fi
  apt_install pgbouncer || say "pgbouncer cannot be installed here: the PgBouncer test will be skipped"
}

ensure_uv
ensure_rabbitmq
ensure_postgres
ensure_database
say "RabbitMQ and PostgreSQL are reachable"
if [ "$WITH_BROWSER" = 1 ]; then
  ensure_test_connections
  ensure_chromium
  ensure_pgbouncer
fi
