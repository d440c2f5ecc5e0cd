"""Session tests: a real store on tmp_path, the real FastHeuristic, the real selector over loopback
HTTP to the scripted chat server (latency and never-answer modes control when the model answers)."""

from session_fixtures import chat_server, close_recallers, log, memory_root, store  # noqa: F401
