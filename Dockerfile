# syntax=docker/dockerfile:1.7
# One image recipe for every taskyard service: docker build --build-arg PACKAGE=taskyard-worker .
# PACKAGE is a workspace member: taskyard-api (also runs taskyard-migrate), taskyard-broker-agent, taskyard-operator,
# taskyard-worker, taskyard-devllm. The Helm chart sets each container's command.
ARG PYTHON_VERSION=3.11

FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

# ---- build: resolve from uv.lock into /app/.venv, dependencies first so source edits keep that layer ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ARG PACKAGE=taskyard-api
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Only the manifests: this layer changes when dependencies change, not when code does.
COPY pyproject.toml uv.lock ./
COPY libs/common/pyproject.toml libs/common/pyproject.toml
# The dev launcher is never installed here, but uv checks the lock against every workspace member's manifest.
COPY libs/devkit/pyproject.toml libs/devkit/pyproject.toml
COPY services/api/pyproject.toml services/api/pyproject.toml
COPY services/broker-agent/pyproject.toml services/broker-agent/pyproject.toml
COPY services/worker/pyproject.toml services/worker/pyproject.toml
COPY services/devllm/pyproject.toml services/devllm/pyproject.toml
COPY services/operator/pyproject.toml services/operator/pyproject.toml
# The client (SDK and command line) is in no image either; its manifest is there for the lock check too.
COPY clients/python/pyproject.toml clients/python/pyproject.toml
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-install-workspace --package "${PACKAGE}"
COPY libs libs
COPY services services
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-editable --package "${PACKAGE}"

# ---- runtime: the virtual environment only, a non-root user, nothing written at run time ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
ARG PACKAGE=taskyard-api
LABEL org.opencontainers.image.source="https://github.com/taskyard/taskyard" \
      org.opencontainers.image.title="${PACKAGE}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 taskyard \
    && useradd --system --uid 10001 --gid taskyard --home-dir /app --no-create-home taskyard
COPY --from=build --chown=root:root /app/.venv /app/.venv
# The default catalog; the chart mounts its ConfigMap over TASKYARD_CATALOG_PATH instead.
COPY --chown=root:root specialists.yaml /app/specialists.yaml
# Bytecode was compiled at build time, so a read-only root filesystem is fine.
ENV PATH="/app/.venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TASKYARD_CATALOG_PATH=/app/specialists.yaml \
    TASKYARD_PACKAGE=${PACKAGE}
WORKDIR /app
USER 10001:10001
# The service's own command (taskyard-worker needs --specialist NAME, which the chart adds).
CMD ["/bin/sh", "-c", "exec \"$TASKYARD_PACKAGE\""]
