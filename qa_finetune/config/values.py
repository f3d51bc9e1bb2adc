"""Single config values and files: the one-line ``ConfigError``, range checks, a value checked
against its field's type, a YAML config file read, a ``--set`` assignment parsed, nested values
merged, the one range every seed is checked against. ``config`` builds its sections and the
resolved config on these.
"""

from __future__ import annotations

import logging
import math
import os
import re
import types
import typing
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from qa_finetune.errors import QAFinetuneError


class ConfigError(QAFinetuneError):
    """A configuration key is unknown, mistyped or out of range."""


class _Mistyped(ConfigError):
    """A value of another type than its key's (an optional key then tries the next type)."""


log = logging.getLogger(__name__)

# Keys renamed since earlier releases, (section, old name) -> new name: user files, runs'
# config.yaml and --set written with the old names still load.
RENAMED_KEYS = {
    ("data", "version_2_with_negative"): "allow_no_answer",
    ("inference", "null_score_diff_threshold"): "no_answer_threshold",
}

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


def check(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError`` naming ``key`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"config key '{key}': {message}")


# (condition, key, message) of each check of a section, in order, made lazily.
Checks = Iterator[tuple[bool, str, str]]


def choice(key: str, value: str, allowed: tuple[str, ...]) -> tuple[bool, str, str]:
    """The check that ``value`` is one of ``allowed``."""
    names = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
    return value in allowed, key, f"must be {names}, got {value!r}"


def check_all(checks: Checks) -> None:
    """Raise for the first failing (condition, key, message); later ones are not evaluated,
    so a check may rely on the ones before it."""
    for condition, key, message in checks:
        check(condition, key, message)


class DuplicateKey(yaml.YAMLError):
    """A mapping that names one key twice (PyYAML would keep the last in silence)."""


class ConfigLoader(yaml.SafeLoader):
    """PyYAML's safe loader without YAML 1.1's base-60 numbers: ``1:30`` stays text (an error
    for a numeric key) instead of becoming 90; a key given twice in one mapping is an error,
    as ``--set`` makes it (neither the file nor its reader says which one was meant)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        lines: dict[str, int] = {}
        for key_node, _ in node.value:  # the keys as written, before ``<<`` merges
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in lines:
                raise DuplicateKey(
                    f"key '{key_node.value}' is given twice (lines {lines[key_node.value]} "
                    f"and {line}): give each key once"
                )
            lines[key_node.value] = line
        return super().construct_mapping(node, deep=deep)


ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# PyYAML's own int and float patterns, less their sexagesimal alternatives.
ConfigLoader.add_implicit_resolver(
    _INT_TAG,
    re.compile(
        r"""^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"""
    ),
    list("-+0123456789"),
)
ConfigLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"""
        r"""|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"""
    ),
    list("-+0123456789."),
)


_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def coerce_value(value: Any, annotation: Any, key: str) -> Any:
    """Check ``value`` against a field annotation; ints are accepted where floats are."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return coerce_value(value, option, key)
            except _Mistyped:
                continue
        names = " or ".join("null" if o is type(None) else o.__name__ for o in options)
        raise _Mistyped(f"config key '{key}': expected {names}, got {value!r}")
    if annotation is bool and isinstance(value, bool):
        return value
    elif annotation is int and isinstance(value, int) and not isinstance(value, bool):
        # NumPy and TensorFlow hold counts and seeds in 64 bits at most.
        # Beyond some 3,000 digits a number cannot even be shown (Python's int to text).
        shown = value if value.bit_length() < 10_000 else f"a {value.bit_length()}-bit number"
        check(abs(value) < 2**63, key, f"must fit in 64 bits, got {shown}")
        return value
    elif annotation is float:
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            # YAML 1.1 reads 1e-4 (no dot) as a string; it is the float people mean.
            value = float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            # .inf and .nan pass every range check (nan compares false) and crash later.
            number = float(value) if abs(value) < 1e300 else math.inf
            check(math.isfinite(number), key, f"must be a finite number, got {value}")
            return number
    elif annotation is str and isinstance(value, str):
        return value
    elif origin is list and isinstance(value, list):  # one type per item (train.student_layers)
        return [coerce_value(item, typing.get_args(annotation)[0], key) for item in value]
    raise _Mistyped(f"config key '{key}': expected {annotation.__name__}, got {value!r}")


def read_yaml(path: Path) -> Mapping[str, Any]:
    """The nested values of a YAML config file, with one-line errors."""
    from qa_finetune.files import read_text
    from qa_finetune.files.nesting import load_yaml

    text = read_text(path, "config file", "--config", ConfigError)
    try:
        values = load_yaml(text, f"config file {path}", ConfigLoader, ConfigError) or {}
    except DuplicateKey as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"config file {path} is not valid YAML: {exc}".replace("\n", " ")
        ) from exc
    if not isinstance(values, Mapping):
        raise ConfigError(f"config file {path} must hold a mapping of sections (model, data, ...)")
    for section, keys in values.items():
        # Checked here, not only once merged: a flag's keys would replace the value unseen.
        if keys is not None and not isinstance(keys, Mapping):
            raise ConfigError(
                f"config file {path}: section '{section}' must be a mapping of keys to values, "
                f"got {type(keys).__name__}: indent its keys under it, or remove it"
            )
    return values


def current_names(values: Mapping[str, Any], where: str | None = None) -> dict[str, Any]:
    """``values`` (sections of keys) with renamed keys under their current names; with
    ``where`` (a user's file) each old name found gets a one-line notice on stderr."""
    result: dict[str, Any] = {}
    for section, keys in values.items():
        if not isinstance(keys, Mapping):
            result[section] = keys
            continue
        result[section] = {}
        for key, value in keys.items():
            new = RENAMED_KEYS.get((section, key))
            if new is None:
                result[section][key] = value
                continue
            if new in keys:
                raise ConfigError(
                    f"config keys '{section}.{key}' and '{section}.{new}' are one setting: "
                    f"keep '{section}.{new}'"
                )
            if where is not None:
                log.warning(f"note: {where}: '{section}.{key}' is now '{section}.{new}'")
            result[section][new] = value
    return result


def merge_sections(into: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Merge nested ``values`` into ``into``, section by section; later values win."""
    for section, section_values in values.items():
        current = into.get(section)
        if isinstance(current, Mapping) and isinstance(section_values, Mapping):
            into[section] = {**current, **section_values}
        else:
            into[section] = section_values


def parse_set_option(assignment: str) -> dict[str, dict[str, Any]]:
    """Turn ``section.key=value`` into a nested dict; the value is parsed as YAML."""
    from qa_finetune.files.nesting import load_yaml

    name, sep, raw = assignment.partition("=")
    section, dot, key = name.strip().partition(".")
    if not sep or not dot or not section or not key:
        raise ConfigError(f"--set expects section.key=value, got {assignment!r}")
    try:
        value = load_yaml(raw, f"--set {name}", ConfigLoader, ConfigError) if raw.strip() else None
    except DuplicateKey as exc:
        raise ConfigError(f"--set {name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {name}: value {raw!r} is not valid YAML") from exc
    return {section: {key: value}}


def set_options(assignments: list[str]) -> dict[str, dict[str, Any]]:
    """The ``--set`` assignments merged; a key given twice is an error, since their order
    does not matter and a silent last-one-wins would."""
    merged: dict[str, dict[str, Any]] = {}
    for assignment in assignments:
        for section, values in parse_set_option(assignment).items():
            for key, value in values.items():
                before = merged.setdefault(section, {})
                if key in before:
                    raise ConfigError(
                        f"--set {section}.{key} is given twice ({before[key]!r} and {value!r}): "
                        "give each key once"
                    )
                before[key] = value
    return current_names(merged)


# Keys whose documented values on/off YAML 1.1 reads as booleans.
_ON_OFF_KEYS = ("train.mixed_precision", "train.calibrate")
# Keys that hold local paths (data files may be joined with commas): "~" is the home folder,
# as in a shell, rather than a folder named "~".
_PATH_KEYS = ("model.name_or_path", "data.train_file", "data.validation_file", "train.output_dir")


def as_written(full_key: str, value: Any) -> Any:
    """``value`` as the user meant it: on/off for booleans, ``~`` expanded in paths."""
    if full_key in _ON_OFF_KEYS and isinstance(value, bool):
        return "on" if value else "off"
    if full_key in _PATH_KEYS and isinstance(value, str) and "~" in value:
        parts = value.split(",")
        return ",".join(
            os.path.expanduser(p.strip()) if p.strip().startswith("~") else p for p in parts
        )
    return value


# The feature cache's folder under the output root (``prepare``); no run may take its name.
FEATURES_DIR = "features"
# Names the run directory's own machinery uses beside runs: staging and replaced folders
# (``model.tmp``, ``X.old``, ``<fingerprint>.tmp-<pid>``, ``.X.replaced``) and lock files.
_MACHINERY_NAME = re.compile(r"\.(tmp|old|replaced|lock)(-.*)?$", re.IGNORECASE)
# The longest name whose hidden backup (``.NAME.replaced``) still fits a file name (255 bytes).
_MAX_RUN_NAME_BYTES = 200


def run_name_problem(name: str | None) -> str | None:
    """Why ``name`` cannot be a run directory's name under the output root, or None."""
    if name is None:
        return None
    shown = f"got {name!r}: choose another --run-name"
    if not name.strip():
        return f"must not be empty, {shown}"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return f"must not contain control characters, {shown}"
    if "/" in name or "\\" in name:
        return f"must be one folder name, without '/' or '\\', {shown}"
    if name.startswith("."):
        # Covers '.' and '..', and the hidden names of runs being replaced and of lock files.
        return f"must not start with '.', {shown}"
    if _MACHINERY_NAME.search(name):
        return f"must not end in .tmp, .old, .replaced or .lock (staging names), {shown}"
    if name.casefold() == FEATURES_DIR:
        return f"must not be '{FEATURES_DIR}', the feature cache's folder, {shown}"
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_RUN_NAME_BYTES:
        return f"must be at most {_MAX_RUN_NAME_BYTES} bytes long, {shown}"
    return None


def seed_problem(seed: int) -> str | None:
    """Why ``seed`` cannot seed NumPy's generator, which takes [0, 2**32), if so: the one check
    of ``train.seed`` and of every ``--seed``."""
    if 0 <= seed < 2**32:
        return None
    shown = str(seed) if abs(seed) < 10**30 else f"an integer of {len(str(abs(seed)))} digits"
    return f"must be in [0, 4294967295], got {shown}"
