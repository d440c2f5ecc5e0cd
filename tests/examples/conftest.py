"""The example agent's tests use the session tests' fixtures."""

from session_fixtures import chat_server, close_recallers, log, memory_root, store  # noqa: F401
