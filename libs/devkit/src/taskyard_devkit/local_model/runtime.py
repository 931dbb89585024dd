"""The runtime: ``llama-cpp-python[server]``, pinned, compiled from source into .taskyard/llm-venv.

Compiled rather than installed from a wheel so that llama.cpp uses this CPU's instructions; that takes a
few minutes, once. The compiler's output goes to a log and its progress to the screen, so a long first run
shows it is moving.

Except AMX: on x86-64 the build leaves llama.cpp's AMX kernels out. ``-march=native`` turns them on wherever
the CPU reports AMX, and on such a host (a Sapphire Rapids VM here) the first decode of the Q4_K_M model
crashed the server with a segmentation fault (also reported as ggml-org/llama.cpp#20824); AVX-512 and
AVX-VNNI stay. A runtime built before this change is rebuilt once: its build id differs.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from taskyard_devkit.checkout import shown
from taskyard_devkit.local_model import feedback
from taskyard_devkit.local_model.feedback import LocalModelError, Say
from taskyard_devkit.local_model.layout import Layout
from taskyard_devkit.local_model.venv import ensure_venv, uv

RUNTIME = "llama-cpp-python[server]==0.3.36"
RUNTIME_VERSION = "0.3.36"
# How the runtime was compiled; written into the venv after a build, so that a change here rebuilds it.
RUNTIME_BUILD = f"{RUNTIME_VERSION}+no-amx"
_NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
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


def runtime_version(layout: Layout) -> str | None:
    """The llama-cpp-python version the runtime venv can import with its server, or None."""
    if not layout.python.exists():
        return None
    probe = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"
    result = subprocess.run(
        [str(layout.python), "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else None


def runtime_ready(layout: Layout) -> bool:
    """Whether the runtime venv imports the pinned version and was compiled the way this module compiles it."""
    try:
        build = layout.runtime_build.read_text().strip()
    except OSError:
        return False
    return build == RUNTIME_BUILD and runtime_version(layout) == RUNTIME_VERSION


def build_env(environ: dict[str, str], machine: str) -> dict[str, str]:
    """The compile's environment: every core, and on x86-64 the AMX instructions off (the module's doc says
    why) whatever ``-march=native`` finds. A ``CMAKE_ARGS`` the user set is kept, these flags after it."""
    env = {**environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)}
    if machine.lower() in ("x86_64", "amd64"):
        no_amx = f'-DCMAKE_C_FLAGS="{_NO_AMX}" -DCMAKE_CXX_FLAGS="{_NO_AMX}"'
        env["CMAKE_ARGS"] = f"{environ['CMAKE_ARGS']} {no_amx}" if environ.get("CMAKE_ARGS") else no_amx
    return env


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


@dataclass
class _Shown:
    """When progress was last shown, and the last compile step seen (the heartbeat repeats it)."""

    at: float
    line: str = ""


def _build_runtime(layout: Layout, say: Say) -> None:
    """``uv pip install -v`` streams the build's output: all of it goes to the log, its progress to the
    screen (every few seconds, and a heartbeat while a long step runs)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write(RUNTIME_CONSTRAINTS)
    # A runtime compiled another way is replaced, not kept because its version matches (--reinstall-package),
    # and compiled again rather than taken from uv's cache, whose wheel may carry the other flags (--no-cache).
    argv = [uv(), "pip", "install", "-v", "--reinstall-package", "llama-cpp-python", "--no-cache"]
    argv += ["--python", str(layout.python), "-c", constraints.name, RUNTIME]
    # Every core: the compile is the long part of a first run.
    env = build_env(dict(os.environ), platform.machine())
    started = time.monotonic()
    last = _Shown(at=started)
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(20):
            if time.monotonic() - last.at >= 20:
                elapsed = time.monotonic() - started
                step = f", last at {last.line}" if last.line else ""
                say(f"  still building ({elapsed // 60:.0f} min {elapsed % 60:02.0f} s{step})")
                last.at = time.monotonic()

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
                    last.line = progress
                    if time.monotonic() - last.at >= 5:
                        say(f"  compiling llama.cpp, {progress}")
                        last.at = time.monotonic()
            code = process.wait()
    finally:
        done.set()
        os.unlink(constraints.name)
    if code != 0:
        raise LocalModelError(
            f"building {RUNTIME} failed (exit {code}); the compiler's output is in {layout.build_log}"
        )
    say(f"  built in {(time.monotonic() - started) / 60:.1f} min")


def ensure_runtime(layout: Layout, say: Say = feedback.say) -> None:
    if runtime_ready(layout):
        return
    say(
        f"building the model server ({RUNTIME}) into {shown(layout.venv)}: it compiles "
        f"llama.cpp for this CPU, which takes a few minutes (about 4 on 2 idle cores), once"
    )
    _ensure_compiler(say)
    ensure_venv(layout)
    _build_runtime(layout, say)
    if runtime_version(layout) != RUNTIME_VERSION:
        raise LocalModelError(f"{RUNTIME} installed but does not import; see {layout.build_log}")
    layout.runtime_build.write_text(RUNTIME_BUILD + "\n")
