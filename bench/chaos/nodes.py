"""Private brokers and databases the chaos suite may stop at will: never the shared local ones.

- ``RabbitNode``: a RabbitMQ node of its own (node name, AMQP and distribution ports, data and log
  directories, Erlang cookie), started with ``rabbitmq-server`` and stopped with ``rabbitmqctl stop``;
  ``rabbit_cluster`` joins three of them.
- ``FailoverProxy``: one loopback address in front of several nodes, each new connection to the first node
  that accepts it, as a Kubernetes Service in front of a RabbitMQ cluster would be.
- ``PrivatePostgres``: a PostgreSQL cluster of its own (``initdb`` in a temporary directory, its own port,
  ``pg_ctl`` to stop and start it).

Everything listens on 127.0.0.1 only and lives under the run's work directory, removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from taskyard_devkit.ports import free_port

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")  # the unwrapped scripts: they run as the calling user
# The node's Erlang distribution listens on the loopback interface only.
_ERL_LOOPBACK = "-kernel inet_dist_use_interface {127,0,0,1}"


def _rabbit_tool(name: str) -> str:
    local = RABBIT_BIN / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: the chaos suite starts RabbitMQ nodes of its own")
    return found


async def _run(argv: list[str], env: dict[str, str], timeout: float, user: str | None = None) -> str:
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        raise RuntimeError(f"{' '.join(argv)} did not finish within {timeout:g}s") from None
    text = output.decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({process.returncode}): {text[-2000:]}")
    return text


class RabbitNode:
    def __init__(self, name: str, base_dir: Path) -> None:
        self.name = name
        self.nodename = f"{name}@localhost"
        self.port = free_port()
        self.dist_port = free_port()
        self.dir = base_dir / name
        # One cookie for the suite's nodes and its rabbitmqctl calls, in a home of their own.
        self.home = base_dir / "erlang-home"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.home),
            "RABBITMQ_NODENAME": self.nodename,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_PID_FILE": str(self.dir / "pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.dir / "advanced.config"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": _ERL_LOOPBACK,
            "RABBITMQ_CTL_ERL_ARGS": _ERL_LOOPBACK,
        }

    async def start(self, timeout: float = 120) -> None:
        """Start the node (its data kept from an earlier start) and wait until it is booted."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "pid").unlink(missing_ok=True)
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            # The suite's own tasks may fill queues quickly: no disk or memory alarm on a busy dev machine.
            "disk_free_limit.absolute = 50MB\n"
        )
        self._proc = self._spawn()
        # ``wait`` (unlike ``await_startup``) also waits for the node to come up at all: its pid file.
        pid_file = str(self.dir / "pid")
        await self.ctl("wait", pid_file, "--timeout", str(int(timeout)), timeout=timeout + 10)

    def _spawn(self) -> subprocess.Popen[bytes]:
        with (self.dir / "server.log").open("ab") as log:
            return subprocess.Popen(
                [_rabbit_tool("rabbitmq-server")], env=self._env(), stdout=log, stderr=subprocess.STDOUT
            )

    async def ctl(self, *args: str, timeout: float = 60) -> str:
        return await _run([_rabbit_tool("rabbitmqctl"), "-n", self.nodename, *args], self._env(), timeout)

    async def stop(self) -> None:
        """``rabbitmqctl stop``: the whole node goes away, as a crashed or drained pod's would."""
        if self._proc is None:
            return
        with contextlib.suppress(RuntimeError):
            await self.ctl("stop", timeout=60)
        try:
            await asyncio.to_thread(self._proc.wait, 30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            await asyncio.to_thread(self._proc.wait, 10)
        self._proc = None

    async def join(self, seed: RabbitNode) -> None:
        await self.ctl("stop_app")
        await self.ctl("join_cluster", seed.nodename)
        await self.ctl("start_app")

    async def queue_leaders(self) -> dict[str, str]:
        """Quorum queue name → the node name of its leader."""
        out = await self.ctl("list_queues", "name", "leader", "--quiet", "--no-table-headers")
        leaders = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                leaders[parts[0]] = parts[1]
        return leaders


@asynccontextmanager
async def rabbit_node(name: str, base_dir: Path) -> AsyncIterator[RabbitNode]:
    node = RabbitNode(name, base_dir)
    try:
        await node.start()
        yield node
    finally:
        await node.stop()


@asynccontextmanager
async def rabbit_cluster(name: str, base_dir: Path, size: int = 3) -> AsyncIterator[list[RabbitNode]]:
    """``size`` nodes started together, the others joined to the first."""
    nodes = [RabbitNode(f"{name}-{i}", base_dir) for i in range(1, size + 1)]
    try:
        await asyncio.gather(*(node.start() for node in nodes))
        for node in nodes[1:]:
            await node.join(nodes[0])
        yield nodes
    finally:
        await asyncio.gather(*(node.stop() for node in nodes), return_exceptions=True)


class FailoverProxy:
    """A loopback port in front of ``ports``: each new connection goes to the first of them (starting after
    the one the previous connection took) that accepts it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.port = 0
        self._next = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> FailoverProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for i in range(len(self.ports)):
            port = self.ports[(self._next + i) % len(self.ports)]
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
            except (OSError, TimeoutError):
                continue
            self._next = (self._next + i + 1) % len(self.ports)
            break
        if upstream is None:
            writer.transport.abort()
            return
        up_reader, up_writer = upstream
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


class PrivatePostgres:
    """A PostgreSQL cluster of the suite's own; as root, its server runs as the ``postgres`` user."""

    def __init__(self, base_dir: Path) -> None:
        self.dir = base_dir / "postgres"
        self.port = free_port()
        self._user = "postgres" if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    async def init(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            shutil.chown(self.dir, self._user, self._user)
            # The server's user must reach its directory through the work directory's parents.
            for parent in self.dir.parents:
                if parent == Path("/tmp") or parent == parent.parent:
                    break
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
        await _run(
            [_pg_tool("initdb"), "-D", str(self.dir / "data"), "-A", "trust", "-U", "postgres", "--no-sync"],
            dict(os.environ),
            120,
            self._user,
        )

    async def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
            " -c max_connections=300 -c synchronous_commit=off"
        )
        data, log = str(self.dir / "data"), str(self.dir / "server.log")
        await _run(
            [_pg_tool("pg_ctl"), "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start"],
            dict(os.environ),
            90,
            self._user,
        )

    async def stop(self, mode: str = "fast") -> None:
        await _run(
            [_pg_tool("pg_ctl"), "-D", str(self.dir / "data"), "-m", mode, "-w", "-t", "60", "stop"],
            dict(os.environ),
            90,
            self._user,
        )


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
        if not candidates:
            raise RuntimeError(f"{name} is not installed: the chaos suite starts a PostgreSQL of its own")
        found = str(candidates[-1])
    return found


@asynccontextmanager
async def private_postgres(base_dir: Path) -> AsyncIterator[PrivatePostgres]:
    pg = PrivatePostgres(base_dir)
    await pg.init()
    await pg.start()
    try:
        yield pg
    finally:
        with contextlib.suppress(RuntimeError):
            await pg.stop("immediate")
