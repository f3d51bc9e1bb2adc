"""Run configuration: frozen dataclasses; defaults < YAML file < CLI flags.

Every section is a frozen dataclass whose ``__post_init__`` checks ranges, so an impossible
value fails where it is set with the key's name in the message.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qa_finetune.config.inference import InferenceConfig
from qa_finetune.config.sections import (
    DEFAULT_MODEL,
    DataConfig,
    ModelConfig,
    ParentConfig,
    PreprocessConfig,
    TrainConfig,
)
from qa_finetune.config.values import (
    ConfigError,
    as_written,
    coerce_value,
    current_names,
    merge_sections,
    read_yaml,
    set_options,
)
from qa_finetune.config.values import parse_set_option as parse_set_option  # re-exported
from qa_finetune.errors import closest_name

# The sections are importable from here, where every caller has always found them.
__all__ = [
    "DEFAULT_MODEL",
    "Config",
    "ConfigError",
    "DataConfig",
    "InferenceConfig",
    "ModelConfig",
    "ParentConfig",
    "PreprocessConfig",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "parse_set_option",
    "requested_values",
    "resolve_config",
]


@dataclass(frozen=True)
class Config:
    """The whole resolved configuration of a run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    preprocess: PreprocessConfig = field(default_factory=PreprocessConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    # The run a run started from (model.init_from), recorded by train.
    parent: ParentConfig = field(default_factory=ParentConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict, as written to ``config.yaml``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Config:
        """Build from a nested dict; unknown sections or keys are errors."""
        return apply_overrides(cls(), values)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


_SECTION_TYPES = {
    "model": ModelConfig,
    "data": DataConfig,
    "preprocess": PreprocessConfig,
    "train": TrainConfig,
    "inference": InferenceConfig,
    "parent": ParentConfig,
}


def apply_overrides(config: Config, values: Mapping[str, Any]) -> Config:
    """Return ``config`` with the nested ``values`` applied, each one type-checked."""
    sections = {}
    for section_name, section_values in current_names(values).items():
        if section_name not in _SECTION_TYPES:
            known = ", ".join(_SECTION_TYPES)
            guess = _did_you_mean(section_name, _SECTION_TYPES)
            raise ConfigError(f"unknown config section '{section_name}' ({guess}known: {known})")
        if section_values is None:
            continue
        if not isinstance(section_values, Mapping):
            raise ConfigError(
                f"config section '{section_name}' must be a mapping of keys to values"
            )
        section_type = _SECTION_TYPES[section_name]
        hints = typing.get_type_hints(section_type)
        changes = {}
        for key, value in section_values.items():
            full_key = f"{section_name}.{key}"
            if key not in hints:
                known = ", ".join(hints)
                guess = _did_you_mean(key, hints, f"{section_name}.")
                raise ConfigError(
                    f"unknown config key '{full_key}' ({guess}known in {section_name}: {known})"
                )
            changes[key] = coerce_value(as_written(full_key, value), hints[key], full_key)
        sections[section_name] = dataclasses.replace(getattr(config, section_name), **changes)
    return dataclasses.replace(config, **sections)


def _did_you_mean(name: str, known: typing.Iterable[str], prefix: str = "") -> str:
    """The words "did you mean X? " for the known name closest to a misspelt ``name``, or
    nothing when none is close."""
    close = closest_name(name, known)
    return f"did you mean {prefix}{close}? " if close else ""


def load_config(path: str | Path | None = None) -> Config:
    """Defaults, then the YAML file at ``path`` when given."""
    if path is None:
        return Config()
    return apply_overrides(Config(), read_yaml(Path(path)))


def requested_values(
    path: str | Path | None,
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    assignments: list[str] | None = None,
) -> dict[str, Any]:
    """Every value the user asked for (YAML file < ``--set`` < flags), merged, not yet checked."""
    merged: dict[str, Any] = {}
    if path is not None:
        merge_sections(merged, current_names(read_yaml(Path(path)), f"config file {path}"))
    merge_sections(merged, set_options(assignments or []))
    for section, values in (flags or {}).items():
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            merge_sections(merged, {section: given})
    data_flags = (flags or {}).get("data", {})
    if data_flags.get("train_file") and not data_flags.get("dataset"):
        # A file named on the command line replaces a Hub dataset set by the file or --set.
        merged.setdefault("data", {})["dataset"] = None
    return merged


def resolve_config(
    path: str | Path | None,
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    assignments: list[str] | None = None,
) -> Config:
    """Defaults < YAML file < ``--set`` assignments < explicit CLI flags (None means unset).

    All values are merged first and checked together, so the order of ``--set`` options does
    not matter (``max_length=128`` then ``stride=32`` is as good as the reverse).
    """
    return apply_overrides(Config(), requested_values(path, flags, assignments))
