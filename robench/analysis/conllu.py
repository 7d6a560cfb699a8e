"""CoNLL-U reading for the structural probe: basic dependency trees and their path distances.

Only the basic tree is kept: multiword-token lines (IDs like `3-4`) and empty nodes (IDs like
`5.1`) are skipped, so a sentence's words are the syntactic words `1..n` whose HEAD column
defines the tree (HEAD 0 is the root). The format: https://universaldependencies.org/format.html
"""
from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robench.core.errors import RobenchError


@dataclass(frozen=True)
class Sentence:
    """One basic dependency tree: word forms, UPOS tags and 1-based heads (0 = root)."""

    words: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.words)

    def edges(self) -> set[tuple[int, int]]:
        """Undirected (0-based) word pairs (i, j), i < j, joined by an arc; the root arc is not an edge."""
        return {tuple(sorted((i, h - 1))) for i, h in enumerate(self.heads) if h > 0}

    def distances(self) -> np.ndarray:
        """n×n matrix of path lengths in the (undirected) tree, by one BFS per word."""
        n = len(self)
        neighbours: list[list[int]] = [[] for _ in range(n)]
        for i, j in self.edges():
            neighbours[i].append(j)
            neighbours[j].append(i)
        out = np.full((n, n), -1, dtype=np.int64)
        for source in range(n):
            out[source, source] = 0
            queue = deque([source])
            while queue:
                node = queue.popleft()
                for nxt in neighbours[node]:
                    if out[source, nxt] < 0:
                        out[source, nxt] = out[source, node] + 1
                        queue.append(nxt)
        if (out < 0).any():
            raise RobenchError(f"dependency tree of {' '.join(self.words)[:60]!r} is not connected")
        return out


def parse_conllu(text: str, source: str = "<text>") -> list[Sentence]:
    """Sentences of a CoNLL-U document; comments, multiword tokens and empty nodes are skipped."""
    sentences: list[Sentence] = []
    rows: list[list[str]] = []
    for number, line in enumerate(text.splitlines() + [""], start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            if rows:
                sentences.append(_sentence(rows, source, number))
                rows = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise RobenchError(f"{source}:{number}: a CoNLL-U token line has 10 tab-separated columns, got {len(cols)}")
        if "-" in cols[0] or "." in cols[0]:
            continue  # multiword token or empty node: not part of the basic tree
        rows.append(cols)
    return sentences


def _sentence(rows: list[list[str]], source: str, line: int) -> Sentence:
    try:
        ids, heads = [int(r[0]) for r in rows], tuple(int(r[6]) for r in rows)
    except ValueError as exc:
        raise RobenchError(f"{source}: sentence ending at line {line} has a non-integer ID or HEAD ({exc})") from exc
    n = len(rows)
    if ids != list(range(1, n + 1)) or any(not 0 <= h <= n for h in heads) or heads.count(0) != 1:
        raise RobenchError(f"{source}: sentence ending at line {line} is not a basic tree "
                           "(IDs must run 1..n, heads lie in 0..n, exactly one root)")
    return Sentence(tuple(r[1] for r in rows), tuple(r[3] for r in rows), heads)


def read_conllu(path: Path) -> list[Sentence]:
    if not path.is_file():
        raise RobenchError(f"CoNLL-U file not found: {path}; point --data-dir or ROBENCH_DATA_DIR at a directory "
                           "laid out like shared/data (ud_english_ewt/)")
    return parse_conllu(path.read_text(encoding="utf-8"), str(path))


def fingerprint(path: Path) -> str:
    """sha256 (first 16 hex digits) of a data file, for the analysis record."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
