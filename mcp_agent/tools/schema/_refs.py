"""``$ref`` inlining with a cycle guard: the schema a tool sends becomes one self-contained tree.

Every ``$ref`` (also ``$dynamicRef``/``$recursiveRef``) that points into the same document, by JSON
pointer or anchor, is replaced by a copy of its target, resolved against the original document;
sibling keywords win over the target's, and ``properties``/``required`` are merged. A recursive
``$ref``, one more than 16 deep in a chain of them, or any ``$ref`` met after 5,000 nodes have been
expanded (against exponential blow-up) is not inlined but replaced by a stub of its target's type;
nesting deeper than 48 levels is cut; an unresolvable ``$ref`` (another document, a bad pointer)
becomes ``{}``. Each of these is noted once per ``$ref``. ``$defs``/``definitions`` are dropped
on the way. Pure, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from ...messages import JSONObject, JSONSchema
from ._nodes import Notes, at_path, map_children

_MAX_SCHEMA_DEPTH = 48  # schema nesting after inlining $refs
_MAX_REF_CHAIN = 16  # $refs expanded inside one another
_MAX_INLINED_NODES = 5_000  # schema nodes visited while inlining, against exponential blow-up
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def inline_refs(root: JSONObject, notes: Notes) -> Any:
    """``root`` (a plain-JSON schema document) with every ``$ref`` inlined and ``$defs`` dropped.

    Args:
        root: the schema document; ``$ref``s are resolved against it.
        notes: where what was inlined or cut is noted.

    Returns:
        The expanded copy; ``root`` is not changed.
    """
    return _Inliner(root, notes).expand(root, "")


class _Inliner:
    """Replaces every ``$ref`` with a copy of its target, resolved against the original document."""

    def __init__(self, root: JSONObject, notes: Notes) -> None:
        self.root = root
        self.notes = notes
        self.budget = _MAX_INLINED_NODES
        self._anchors: dict[str, Any] | None = None
        self._noted: set[tuple[str, str]] = set()

    def note(self, kind: str, ref: str, text: str) -> None:
        """One note per kind and $ref (the first place it happens), however often it happens."""
        if (kind, ref) not in self._noted:
            self._noted.add((kind, ref))
            self.notes.add(text)

    def resolve(self, ref: str) -> tuple[bool, Any]:
        """``(found, target)`` for a ``$ref`` within this document: a JSON pointer or an anchor."""
        base, _, fragment = ref.partition("#")
        if base and base != self.root.get("$id"):
            return False, None
        fragment = unquote(fragment)
        if not fragment:
            return True, self.root
        if not fragment.startswith("/"):
            anchors = self._anchor_index()
            return (fragment in anchors), anchors.get(fragment)
        node: Any = self.root
        for token in fragment[1:].split("/"):
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and re.fullmatch(r"[0-9]+", token) and int(token) < len(node):
                node = node[int(token)]
            else:
                return False, None
        return True, node

    def _anchor_index(self) -> dict[str, Any]:
        if self._anchors is None:
            self._anchors = {}
            stack: list[Any] = [self.root]
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    for key in ("$anchor", "$dynamicAnchor"):
                        if isinstance(node.get(key), str):
                            self._anchors.setdefault(node[key], node)
                    if isinstance(node.get("$id"), str) and node["$id"].startswith("#"):
                        self._anchors.setdefault(node["$id"][1:], node)
                    stack.extend(node.values())
                elif isinstance(node, list):
                    stack.extend(node)
        return self._anchors

    def expand(self, node: Any, path: str, chain: tuple[str, ...] = (), depth: int = 0) -> Any:
        """``node`` with its ``$ref``s inlined; ``chain`` holds the $refs being expanded around it."""
        if not isinstance(node, dict):
            return node
        self.budget -= 1
        if depth > _MAX_SCHEMA_DEPTH:
            self.notes.add(f"cut the schema below {_MAX_SCHEMA_DEPTH} levels{at_path(path)}")
            return {}
        node = {k: v for k, v in node.items() if k not in ("$defs", "definitions")}
        ref = next((node[k] for k in _REF_KEYS if isinstance(node.get(k), str)), None)

        def child(value: Any, _keyword: str, child_path: str) -> Any:
            return self.expand(value, child_path, chain, depth + 1)

        if ref is None:
            return map_children(node, child, path)
        siblings = {k: v for k, v in node.items() if k not in _REF_KEYS}
        found, target = self.resolve(ref)
        if not found or not isinstance(target, (dict, bool)):
            self.note("unresolvable", ref, f"unresolvable $ref {ref}{at_path(path)} replaced by {{}}")
            replacement: Any = {}
        elif isinstance(target, bool):
            replacement = {} if target else {"not": {}}
        elif ref in chain:
            replacement = _cycle_stub(target)
            self.note(
                "cycle",
                ref,
                f"recursive $ref {ref} cut{at_path(path)} (replaced by {json.dumps(replacement)})",
            )
        elif len(chain) >= _MAX_REF_CHAIN or self.budget <= 0:
            replacement = _cycle_stub(target)
            why = f"more than {_MAX_REF_CHAIN} $refs deep" if self.budget > 0 else "the schema is too large"
            self.note(
                "cut",
                ref,
                f"$ref {ref}{at_path(path)} not inlined: {why} (replaced by {json.dumps(replacement)})",
            )
        else:
            self.notes.add(f"inlined $ref {ref}")
            replacement = self.expand(target, path, (*chain, ref), depth)
        return _merge_ref(replacement, map_children(siblings, child, path))


def _cycle_stub(target: JSONObject) -> JSONSchema:
    """What stands in for a $ref that is not inlined: only the target's type."""
    kind = target.get("type")
    if isinstance(kind, (str, list)):
        return {"type": kind}
    return {"type": "object"} if "properties" in target else {}


def _merge_ref(target: Any, siblings: JSONObject) -> Any:
    """``$ref`` plus sibling keywords: the siblings win, ``properties`` and ``required`` are merged."""
    if not siblings:
        return target
    if not isinstance(target, dict):
        return siblings
    merged = dict(target)
    for key, value in siblings.items():
        if key == "properties" and isinstance(merged.get(key), dict) and isinstance(value, dict):
            merged[key] = {**merged[key], **value}
        elif key == "required" and isinstance(merged.get(key), list) and isinstance(value, list):
            merged[key] = list(dict.fromkeys([*merged[key], *value]))
        else:
            merged[key] = value
    return merged
