"""Helpers for heuristic tests: memory documents and snapshots built in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_store import MemoryDoc, Snapshot


def _make_doc(
    path: str,
    name: str,
    description: str,
    body: str = "",
    *,
    keywords: tuple[str, ...] = (),
    scope: str = "mem",
) -> MemoryDoc:
    return MemoryDoc(
        scope=scope,
        path=path,
        abspath=Path("/memories") / path,
        name=name,
        description=description,
        type="project",
        keywords=keywords,
        extra={},
        body=body,
        mtime=0.0,
        size=len(body),
        content_hash=str(hash((name, description, body))),
    )


def _make_snapshot(*docs: MemoryDoc, version: int = 1) -> Snapshot:
    mapping = {doc.ref: doc for doc in docs}
    return Snapshot.build(version, mapping, (), frozenset(mapping))


@pytest.fixture
def make_doc():
    return _make_doc


@pytest.fixture
def make_snapshot():
    return _make_snapshot


@pytest.fixture
def developer_docs() -> list[MemoryDoc]:
    return [
        _make_doc(
            "db/postgres.md",
            "Postgres setup",
            "The routewise API stores trips in PostgreSQL 16 behind pgbouncer.",
            "Connection string lives in .env as DATABASE_URL. Run migrations with alembic upgrade head.",
            keywords=("postgres", "database"),
        ),
        _make_doc(
            "db/redis.md",
            "Redis cache",
            "Session cache and rate limits use Redis 7 on the homelab box.",
            "Keys expire after 15 minutes; flush with redis-cli FLUSHDB only on staging.",
        ),
        _make_doc(
            "deploy/fly.md",
            "Deploying routewise",
            "routewise deploys to Fly.io with flyctl deploy from the main branch.",
            "Secrets are set with flyctl secrets set. Roll back with flyctl releases.",
        ),
        _make_doc(
            "user/editor.md",
            "Editor preferences",
            "Priya uses Neovim with lazy.nvim and prefers tabs of width 4.",
            "She dislikes auto-formatting on save for Markdown files.",
        ),
        _make_doc(
            "code/style.md",
            "Python style",
            "Type hints everywhere; the getUserName helper lives in routewise.auth_utils.",
            "Use snake_case for functions and ruff for linting.",
        ),
    ]
