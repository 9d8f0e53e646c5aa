"""Stage 1: read manifest YAML once, keeping line numbers, rejecting duplicate keys.

Produces plain Python values wrapped so that every mapping remembers the line of each key.
Parsing never writes files and knows nothing about C++.
"""
from __future__ import annotations

from dataclasses import dataclass

import yaml


_SCALARS = yaml.constructor.SafeConstructor()


class ManifestError(Exception):
    """An error that points at its source: 'manifests/norm.yaml:12: RMSNormFwdOp: <rule>; <fix>'."""

    def __init__(self, path: str, line: int, entry: str | None, message: str):
        self.path, self.line, self.entry, self.message = path, line, entry, message
        where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + (f"{entry}: " if entry else "") + message)


class LMap(dict):
    """A mapping that remembers its own line and the line of each key (1-based)."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LList(list):
    line: int = 0


@dataclass(frozen=True)
class RawManifest:
    path: str
    entries: LMap  # class name -> LMap


def _convert(node: yaml.Node, path: str):
    if isinstance(node, yaml.MappingNode):
        out = LMap()
        out.line = node.start_mark.line + 1
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = _convert(key_node, path)
            if not isinstance(key, str):
                raise ManifestError(path, key_node.start_mark.line + 1, None,
                                    f"mapping keys must be strings, got {key!r}")
            if key in out:
                raise ManifestError(path, key_node.start_mark.line + 1, None,
                                    f"duplicate key '{key}' (first at line {out.key_lines[key]})")
            out[key] = _convert(value_node, path)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out = LList(_convert(n, path) for n in node.value)
        out.line = node.start_mark.line + 1
        return out
    # Scalars: let the safe constructor decide int/float/bool/null/str from the resolved tag.
    return _SCALARS.construct_object(node)


def parse_text(text: str, path: str) -> RawManifest:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ManifestError(path, (mark.line + 1) if mark else 0, None, f"invalid YAML: {e}") from None
    if root is None:
        empty = LMap()
        empty.line, empty.key_lines = 1, {}
        return RawManifest(path, empty)
    data = _convert(root, path)
    if not isinstance(data, LMap):
        raise ManifestError(path, 1, None, "a manifest is a mapping from op class names to entries")
    return RawManifest(path, data)


def parse_file(path: str, display_path: str | None = None) -> RawManifest:
    with open(path, encoding="utf-8") as f:
        return parse_text(f.read(), display_path or path)
