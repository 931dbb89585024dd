"""One taskyard process, started from the console script users run, its output in a log file.

Tests and benchmarks run the services as real processes so that what they check is what ships: the same
entry points, settings from the environment, signals and exit codes. The log file is what a failing test
or benchmark prints to say why.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# The environment's bin/ folder: every workspace member's console scripts are installed there.
BIN = Path(sys.executable).parent


class Service:
    """One service process; its output goes to ``<log_dir>/<name>.log``.

    ``argv[0]`` names a console script in ``BIN``, or is an absolute path (such as another environment's
    Python) that is run as it is.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        # Unbuffered, so the log is current when a failing check reads it.
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [str(BIN / argv[0]), *argv[1:]], env=full_env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, as Kubernetes stops a pod, then a kill after ``timeout``; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode
