"""What the figures were measured on: machine, load, versions."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata

import aio_pika
import asyncpg

PACKAGES = (
    "aio-pika",
    "aiormq",
    "asyncpg",
    "fastapi",
    "uvicorn",
    "httpx",
    "openai",
    "pydantic",
    "celery",
    "kombu",
    "sqlalchemy",
    "psycopg",
)


def source_revision(root: str) -> str:
    """The commit measured, and whether the work tree had uncommitted changes (they were measured too)."""
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (
        " plus uncommitted changes in the work tree" if dirty.stdout.strip() else ""
    )


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_gib() -> float | None:
    try:
        for line in open("/proc/meminfo", encoding="utf-8"):
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


async def server_versions(amqp_url: str, db_url: str) -> dict[str, str]:
    versions = {"Python": sys.version.split()[0]}
    connection = await aio_pika.connect(amqp_url, client_properties={"connection_name": "bench versions"})
    try:
        properties = connection.transport.connection.server_properties  # type: ignore[union-attr]
        version = properties.get("version", b"?")
        versions["RabbitMQ"] = version.decode() if isinstance(version, bytes) else str(version)
    finally:
        await connection.close()
    conn = await asyncpg.connect(db_url)
    try:
        versions["PostgreSQL"] = await conn.fetchval("SHOW server_version")
    finally:
        await conn.close()
    return versions
