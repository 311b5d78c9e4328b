"""Concept taxonomies: SELECT's nested JSON, generic nested ``children`` JSON, edge-list CSV.

Relations follow SELECT: ancestors A(c) = path from the root to c (c excluded, the implicit
root ``schema:Thing`` excluded), descendants D(c) = every node of the subtree under c (c
excluded), siblings S(c) = the other children of c's parent (top-level concepts are siblings of
each other). ``depth(c)`` is 0 for a top-level concept.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import closing
from typing import Any

from rapidscore.common.io import iter_lines, load_json
from rapidscore.common.readers import csv_rows
from rapidscore.errors import TaxonomyError


class Taxonomy:
    """An immutable forest of concepts (ids -> optional display names)."""

    def __init__(self, edges: Iterable[tuple[str | None, str]], names: Mapping[str, str] | None = None,
                 source: str = "<taxonomy>"):
        self.source = source
        self._parent: dict[str, str | None] = {}
        self._children: dict[str, list[str]] = {}
        for parent, child in edges:
            if not isinstance(child, str) or not child:
                raise TaxonomyError(f"{source}: concept ids must be non-empty strings, got {child!r}")
            if child in self._parent:
                raise TaxonomyError(f"{source}: duplicate concept id {child!r} (a concept can have one parent)")
            self._parent[child] = parent
            self._children.setdefault(child, [])
        for child, parent in self._parent.items():
            if parent is not None:
                if parent not in self._parent:
                    raise TaxonomyError(f"{source}: parent {parent!r} of {child!r} is not a concept")
                self._children[parent].append(child)
        self._names = dict(names or {})
        self._depth: dict[str, int] = {}
        for concept in self._parent:  # detects cycles
            self._compute_depth(concept)

    def _compute_depth(self, concept: str) -> int:
        chain: list[str] = []
        node: str | None = concept
        while node is not None and node not in self._depth:
            if node in chain:
                cycle = " -> ".join(chain[chain.index(node):] + [node])
                raise TaxonomyError(f"{self.source}: cycle in taxonomy: {cycle}")
            chain.append(node)
            node = self._parent[node]
        base = -1 if node is None else self._depth[node]
        for offset, n in enumerate(reversed(chain), start=1):
            self._depth[n] = base + offset
        return self._depth[concept]

    # ---- constructors ---------------------------------------------------------------------
    @classmethod
    def from_nested(cls, tree: Mapping, *, children_key: str = "children", name_key: str = "name",
                    source: str = "<nested>") -> Taxonomy:
        """From ``{id: {"name": ..., "children": {id: {...}}}}`` (SELECT) or a list form
        ``[{"id": ..., "name": ..., "children": [...]}]``."""
        edges, names = [], {}

        def walk(node_map, parent, path):
            items: Iterable[tuple[Any, Any]]
            if isinstance(node_map, Mapping):
                items = node_map.items()
            elif isinstance(node_map, list):
                listed = []
                for i, node in enumerate(node_map):
                    if not isinstance(node, Mapping) or "id" not in node:
                        raise TaxonomyError(f"{source}: node {'/'.join(path + [str(i)])} has no 'id'")
                    listed.append((node["id"], node))
                items = listed
            else:
                raise TaxonomyError(f"{source}: children at {'/'.join(path) or '<root>'} must be a mapping or list")
            for concept, node in items:
                if not isinstance(node, Mapping):
                    raise TaxonomyError(f"{source}: concept {concept!r} must map to an object")
                edges.append((parent, concept))
                if name_key in node:
                    names[concept] = node[name_key]
                walk(node.get(children_key, {}) or {}, concept, path + [str(concept)])

        walk(tree, None, [])
        return cls(edges, names, source)

    @classmethod
    def from_edges_csv(cls, path: str | os.PathLike, *, parent_column: str = "parent",
                       child_column: str = "child", name_column: str | None = "name") -> Taxonomy:
        """From a CSV with parent/child columns (empty parent = top-level concept)."""
        path = os.fspath(path)
        edges, names, seen = [], {}, set()

        def check_columns(header: list[str], _where: str) -> None:
            missing = {parent_column, child_column} - set(header)
            if missing:
                raise TaxonomyError(f"{path}: missing column(s) {sorted(missing)}")

        # the shared CSV reader: fields past csv's 131,072 characters, records bounded, errors named
        with closing(iter_lines(path)) as handle:
            for row, where in csv_rows(handle, path, check_columns=check_columns):
                child, parent = (row[child_column] or "").strip(), (row[parent_column] or "").strip()
                if not child:
                    raise TaxonomyError(f"{where}: empty {child_column!r}")
                edges.append((parent or None, child))
                seen.update([child] + ([parent] if parent else []))
                if name_column and row.get(name_column):
                    names[child] = row[name_column]
        have = {c for _, c in edges}
        edges.extend((None, p) for p in sorted(seen - have))  # parents never listed as children
        return cls(edges, names, path)

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs) -> Taxonomy:
        """A taxonomy file: ``.csv`` edge list, else nested JSON (SELECT ``taxonomy.json``)."""
        path = os.fspath(path)
        if path.endswith(".csv"):
            return cls.from_edges_csv(path, **kwargs)
        try:
            tree = load_json(path)
        except ValueError as exc:
            raise TaxonomyError(str(exc)) from None
        try:
            return cls.from_nested(tree, source=path, **kwargs)
        except RecursionError:
            raise TaxonomyError(f"{path}: the taxonomy is nested too deeply to read "
                                f"(over ~{sys.getrecursionlimit()} levels)") from None

    # ---- queries ----------------------------------------------------------------------------
    def _check(self, concept: str) -> str:
        if concept not in self._parent:
            raise KeyError(f"concept {concept!r} is not in taxonomy {self.source}")
        return concept

    def __contains__(self, concept) -> bool:
        return concept in self._parent

    def __len__(self) -> int:
        return len(self._parent)

    def __iter__(self) -> Iterator[str]:
        """Concepts in pre-order (roots in file order)."""
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self._children[node]))

    @property
    def roots(self) -> list[str]:
        return [c for c, p in self._parent.items() if p is None]

    def name(self, concept: str) -> str:
        return self._names.get(self._check(concept), concept)

    def parent(self, concept: str) -> str | None:
        return self._parent[self._check(concept)]

    def children(self, concept: str) -> list[str]:
        return list(self._children[self._check(concept)])

    def is_leaf(self, concept: str) -> bool:
        return not self._children[self._check(concept)]

    def ancestors(self, concept: str) -> list[str]:
        """Root first, ``concept`` excluded."""
        out, node = [], self._parent[self._check(concept)]
        while node is not None:
            out.append(node)
            node = self._parent[node]
        return out[::-1]

    def path(self, concept: str) -> list[str]:
        return self.ancestors(concept) + [concept]

    def descendants(self, concept: str) -> list[str]:
        """Whole subtree in pre-order, ``concept`` excluded."""
        out, stack = [], list(reversed(self._children[self._check(concept)]))
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(self._children[node]))
        return out

    def siblings(self, concept: str) -> list[str]:
        parent = self._parent[self._check(concept)]
        pool = self.roots if parent is None else self._children[parent]
        return [c for c in pool if c != concept]

    def depth(self, concept: str) -> int:
        """0 for a top-level concept."""
        return self._depth[self._check(concept)]

    level = depth


def load_compositions(path: str | os.PathLike) -> dict[str, Taxonomy]:
    """SELECT composition taxonomy: ``{relation: {composite_id: {name, children}}}`` -> one
    :class:`Taxonomy` per relation."""
    path = os.fspath(path)
    try:
        data = load_json(path)
    except ValueError as exc:
        raise TaxonomyError(str(exc)) from None
    if not isinstance(data, Mapping):
        raise TaxonomyError(f"{path}: expected an object keyed by relation")
    return {rel: Taxonomy.from_nested(tree, source=f"{path}[{rel}]") for rel, tree in data.items()}
