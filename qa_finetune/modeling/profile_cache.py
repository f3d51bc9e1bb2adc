"""Cost profiles kept on disk, one small JSON per model architecture, backend and machine.

They live under ``$XDG_CACHE_HOME/qa-finetune/batch-profiles/`` (``~/.cache`` by default),
never in a run or export folder: a profile describes this machine, not the model, and a
folder copied or pushed elsewhere must not carry it. The key holds what changes the cost:
the model's ``config.json`` (its shape, not its weights), the backend and the model file it
runs, the CPU, the cores this process may use, the host and the package and runtime versions.
A profile that cannot be read is measured again; one that cannot be written is only logged.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import platform
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path

from qa_finetune.modeling.batch_policy import CostProfile
from qa_finetune.modeling.cpu_threads import threads_per_pass, usable_cores

log = logging.getLogger(__name__)

# The runtime whose version changes the cost, by backend.
RUNTIME = {"tf": "tensorflow", "onnx": "onnxruntime"}


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/qa-finetune/batch-profiles`` (``~/.cache`` when it is not set)."""
    root = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(root) if root else Path.home() / ".cache"
    return base / "qa-finetune" / "batch-profiles"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def profile_key(
    model_dir: Path, backend: str, lengths: Sequence[int], model_file: str = ""
) -> dict[str, object]:
    """What a cached profile must match to be used (see the module)."""
    from qa_finetune import __version__

    config = Path(model_dir) / "config.json"
    shape = hashlib.sha256(config.read_bytes() if config.is_file() else b"").hexdigest()
    return {
        "config_sha256": shape,
        "backend": backend,
        "model_file": model_file,
        "lengths": list(lengths),
        "cpu": cpu_model(),
        "cores": usable_cores(),
        "threads_per_pass": threads_per_pass(),
        "host": platform.node(),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
        "qa_finetune": __version__,
        "runtime": _version(RUNTIME.get(backend, backend)),
    }


def _path(key: dict[str, object]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_dir() / f"{key['backend']}-{digest}.json"


def read(key: dict[str, object]) -> CostProfile | None:
    """The cached profile for ``key``, or None (absent, unreadable or for another key)."""
    path = _path(key)
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("key") != key:
            return None
        return CostProfile.from_dict(stored["profile"])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        log.warning("measuring again: cannot use the cost profile %s (%s)", path, exc)
        return None


def write(key: dict[str, object], profile: CostProfile) -> Path | None:
    """Keep ``profile`` for ``key``; the path, or None when the cache is not writable."""
    path = _path(key)
    text = json.dumps({"key": key, "profile": profile.to_dict()}, indent=2) + "\n"
    # A name per process: `serve --workers N` may write the same profile at once.
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:
        log.warning(
            "cannot keep the cost profile in %s (%s): it is measured again next time",
            path.parent,
            exc,
        )
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        return None
    return path


def forget(key: dict[str, object]) -> None:
    """Drop the profile cached for ``key`` (it is measured again when next needed)."""
    path = _path(key)
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove the cost profile %s (%s)", path, exc)


@contextlib.contextmanager
def locked(key: dict[str, object]) -> Iterator[None]:
    """Hold the profile's lock: the processes of `serve --workers N` measure one at a time
    (measuring at once would time each other), the later ones reading the first one's
    profile. Without a writable cache folder it holds nothing."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(f".{path.stem}.lock"), "a")  # noqa: SIM115
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
