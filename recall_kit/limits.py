"""Every size limit of the engine and its integrations, and the one prompt policy.

A prompt is read by its stages in parts: the fast stage reads its head and tail
(``PROMPT_HEAD_CHARS`` and ``PROMPT_TAIL_CHARS`` characters, then at most ``QUERY_HEAD_TOKENS``
and ``QUERY_TAIL_TOKENS`` tokens of each), the model reads its first ``MODEL_PROMPT_CHARS``
characters. ``bounded_prompt`` cuts a prompt to exactly what they read, and every place a prompt
enters (``RecallSession.begin``, ``recall-kit query``, the daemon, the Claude Code hook, the MCP
server) applies it before any transport limit does, so a 10 MB prompt gets the recall its head and
tail get, whatever carries it.

This module imports nothing beyond the standard library: the hook, which runs on every prompt,
reads it without loading the engine. The store's own limits (file size, sidecar terms) live in
``memory_store`` and are repeated here for reference.
"""

from __future__ import annotations


# --- what the stages read of a prompt ------------------------------------------------------------

# The fast stage's work stays bounded whatever the prompt's size (a pasted log, a whole file);
# every query of the eval datasets fits whole.
PROMPT_HEAD_CHARS = 1024
PROMPT_TAIL_CHARS = 1024
QUERY_HEAD_TOKENS = 64
QUERY_TAIL_TOKENS = 64
MODEL_PROMPT_CHARS = 4_000  # of the (stripped) prompt in the model's request
PROMPT_ELLIPSIS = " … "  # where a prompt was cut

# --- results ---------------------------------------------------------------------------------------

MAX_FAST_DOCS = 2  # the fast stage delivers at most this many documents
MAX_MODEL_DOCS = 5  # the model may select at most this many
RANKED_LIMIT = 50  # of the fast stage's ungated ranking, kept for the model's manifest and `query -v`
# The gate's look at a document's keywords and usage scenarios (one entry each): of a word, the first
# ENTRIES_PER_TERM entries holding it, of an entry its first ENTRY_TERMS terms. A real memory lists
# 12-20 keywords and 3 scenarios of a few words; a 256 KiB list of keywords cost a query 30 ms before.
ENTRIES_PER_TERM = 64
ENTRY_TERMS = 32

# --- the model's request and answer -----------------------------------------------------------------

MAX_MANIFEST_DOCS = 200
MAX_MANIFEST_BYTES = 25_000
MAX_DESCRIPTION_CHARS = 300  # a description is a one-line summary; longer text is noise to the model
MAX_MANIFEST_KEYWORDS = 12
MAX_MANIFEST_KEYWORD_CHARS = 40
MAX_MANIFEST_KEYWORDS_BYTES = 120  # frontmatter and enrichment keywords together: 71 enriched lines fit MAX_MANIFEST_BYTES
MAX_MANIFEST_SCENARIOS = 1  # one example request says enough; the line stays short
MAX_MANIFEST_SCENARIOS_BYTES = 80
MAX_ANSWER_TOKENS = 256  # five references fit in ~150 tokens; a cap stops a small model's runaway output
MAX_RESPONSE_BYTES = 1 << 20  # every answer we ask for is a few KiB; more is a broken or hostile server
ERROR_SNIPPET_CHARS = 160  # of a server's error message in a failure reason
ERROR_SCAN_BYTES = 16_384  # of an error body read for its message
REJECTED_REF_CHARS = 200  # of a rejected reference as shown

# --- enrichment's request ---------------------------------------------------------------------------

MAX_ENRICH_TOKENS = 400  # 20 short keys and 3 requests fit in ~300 tokens; the cap stops a small model's runaway output
MAX_ENRICH_BODY_CHARS = 4_000  # the head of a long body says what it is about
MAX_ENRICH_FIELD_CHARS = 300  # of the title and description shown to the model
MAX_KEYWORD_WORDS = 6  # a longer "keyword" is a sentence (or an injected instruction), not a search key
# Background enrichment takes what to do from a queue refilled from each snapshot, newest first: 1,000
# memories written at once are a thousand versions pending, never more work held in memory than this.
ENRICH_MAX_QUEUE = 256

# --- the keyword vocabulary and the note asking an agent to write search terms ----------------------

# The vocabulary (the keywords a store's memories carry, most used first) shown to a memory's writer:
# about 40 terms of one or two words, some 110 tokens.
VOCABULARY_MAX_TERMS = 60
VOCABULARY_MAX_CHARS = 420  # of its JSON array
VOCABULARY_TERM_CHARS = 40
VOCABULARY_INSPECT_TERMS = 200_000  # keywords looked at to rank it: 10,000 memories of 20 each
# The note (the request and the vocabulary) rides in the hook's context beside a rendered block at
# the session's first prompt: the two stay under HOOK_CONTEXT_MAX_CHARS (tests/recall_kit/test_vocabulary.py).
WRITING_NOTE_MAX_CHARS = 960

# --- the rendered block ------------------------------------------------------------------------------

BODY_BUDGET = 1200  # characters of body per document: five documents stay near 1,500 tokens
RENDER_FIELD_CHARS = 300  # of a title, reference or description: one line; a 240 KB "description" is not one
# The whole block, fields, notes and tags included: five documents at their body budget fit
# (about 1,450 characters each), and the block stays under HOOK_CONTEXT_MAX_CHARS.
RENDER_MAX_CHARS = 9_000

# --- the daemon, its protocol and the hook ----------------------------------------------------------

MAX_SESSION_ID_CHARS = 256
SOCKET_PATH_MAX_BYTES = 107  # a Unix socket's path on Linux: sun_path holds 108 bytes, the last a NUL
PROTOCOL_MAX_LINE_BYTES = 1 << 20  # a request or response line; a bounded prompt is far below it
# The hook reads Claude Code's whole event to find its few fields; a prompt or tool response can be
# large, and the prompt is cut only once the event is parsed.
HOOK_MAX_STDIN_BYTES = 64 << 20
HOOK_LOG_MAX_BYTES = 1 << 20  # the hook log, and the daemon log at each start, rotate once past this, keeping one old file
HOOK_LOG_LINE_CHARS = 2_000  # a logged message (an agent's event name is untrusted): one line never rotates the log away
# The recall trail (`recall-kit hook log`): about 4,000 prompts of 250 bytes in each of its two
# files; a prompt's text, kept only on request, is cut to its first TRAIL_PROMPT_CHARS characters.
TRAIL_MAX_BYTES = 1 << 20
TRAIL_PROMPT_CHARS = 200
HOOK_CONTEXT_MAX_CHARS = 10_000  # Claude Code caps a hook's additionalContext at this; longer is cut or filed away
# What any client may make the daemon open: a root set of at most this many folders, holding at
# most this many files and folders (hidden ones skipped, as the store does; counted up to the
# limit, never further): five times the largest store the benchmarks run (10,000 memories).
# DAEMON_MAX_ROOT_ENTRIES is the store's own bound, memory_store.MAX_ROOT_ENTRIES, which the daemon's
# stores apply again at every rescan and whenever a root's folder changes (read on first use, below:
# the hook imports this module and needs no part of the store).
DAEMON_MAX_ROOTS = 16
# Root sets open at once: each is a watched store (an inotify instance of the user's 128 and about
# five threads); opening one more closes the least recently used, and its sessions with it.
DAEMON_MAX_STORES = 16
DAEMON_MAX_SESSIONS = 1_000  # live agent sessions (about 4 KB each); one more closes the least recently used
# Connections open at once (a hook holds one for under a second): one more closes the one waiting
# longest for a request, so clients that connect and stall never use up the daemon's descriptors (a
# soft limit of 1,024 is common) and a hook is still answered. A connection that sends no whole
# request line for DAEMON_CONNECTION_IDLE_S, or reads none of its answers for as long, is closed, so a
# client stalled mid-line or never reading never keeps the daemon from its idle exit.
DAEMON_MAX_CONNECTIONS = 256
DAEMON_CONNECTION_IDLE_S = 60.0
# The daemon's background enrichment, across all its stores: calls in flight and started a minute
# (a prompt's selector call always goes first). A memory the agent writes now and then is enriched
# at once; a backlog of 200 memories takes 20 minutes, one at a time behind the user's own prompts.
DAEMON_ENRICH_CONCURRENCY = 2
DAEMON_ENRICH_CALLS_PER_MINUTE = 10.0
# SessionStart asks the daemon for the note with its vocabulary: a root set not open by then gets
# the note with the session's first prompt instead (its opening goes on, for that prompt).
WRITING_NOTE_WAIT_S = 0.4
# What was delivered in each session, kept so that a restarted daemon delivers nothing twice in one:
# about 2,000 deliveries of 120 bytes in each of its two files.
SURFACED_MAX_BYTES = 256 * 1024

# --- settings ----------------------------------------------------------------------------------------

# The longest a model call may be given, from any source: a hung endpoint cannot hold a turn past it.
MAX_MODEL_TIMEOUT_S = 300.0

# --- settings files ------------------------------------------------------------------------------

CONFIG_MAX_BYTES = 1 << 20  # a recall-kit.toml is a few hundred bytes; past this it is refused, never read whole

# --- the index cache ---------------------------------------------------------------------------------

# One cache file per root set: 140 files (26 MB) built up in an afternoon of tests and daemon clients.
CACHE_MAX_FILES = 16  # the least recently used beyond this are removed when a cache is written
CACHE_MAX_UNUSED_DAYS = 30  # a cache unused this long is removed when another is written

# --- the store's own (owned by memory_store, repeated for reference) --------------------------------

LEARN_MAX_PENDING = 256  # refined selections waiting to teach; past it one is dropped, never waited for
# A refinement whose turn ended (finish, or a new begin) before the model answered may go on, for
# learning only: at most one per session (a newer one cancels it) and this many across every session of one
# model stage (``ModelSelector.after_turn``; the daemon's one selector serves its whole process); past it
# the turn's refinement is cancelled, as without learning.
LEARN_MAX_AFTER_TURN = 8
# A word is written only once it came in two different turns; until then it is a hash in the learner's
# memory (recall_kit/_seen_words.py). These bound that memory per learner (a daemon has one per root
# set): about 1 MB at most. A fold of locomo-dev's replay trains on about 5,000 distinct words.
LEARN_SEEN_WORDS = 8_192  # words of earlier turns; the least recently seen forgotten first
LEARN_WAITING_KEYS = 4_096  # (word, memory) learned keys waiting for their word to come again
LEARN_WAITING_SUPPRESSORS = 1_024  # suppressors waiting for all their words to come again
LEARN_CLOSE_WAIT_S = 5.0  # Recaller.close waits this long for the learner's last update (another process may hold its lock)
ENRICH_CLOSE_WAIT_S = 10.0  # and this long for background enrichment's thread (its sidecar write may wait on a lock)
# memory_store.MAX_LEARNED_KEYS (48), MAX_SUPPRESSORS (16), MAX_LEARNED_TERMS (16) and
# MAX_LEARNED_TERM_CHARS (40) bound what the learned sidecar keeps per memory
MEMORY_MAX_BYTES = 256 * 1024  # memory_store.DEFAULT_MAX_BYTES
# memory_store.MAX_FOLDER_DEPTH (64): folders deeper below a root are reported, never read or watched


def bounded_prompt(prompt: str) -> str:
    """``prompt`` cut to what recall reads of it: unchanged when short, else its head as far as the
    model reads it, then ``PROMPT_ELLIPSIS`` and the tail the fast stage reads.

    Recall over the result is the same as over the whole prompt: the fast stage's head and tail
    windows hold the same text, and so does the model's head of the stripped prompt (leading
    whitespace is kept up to the fast stage's head window). Bounded work whatever the prompt's size.
    """
    if len(prompt) <= PROMPT_HEAD_CHARS + MODEL_PROMPT_CHARS + len(PROMPT_ELLIPSIS) + PROMPT_TAIL_CHARS:
        return prompt
    lead = len(prompt) - len(prompt.lstrip())
    kept_lead = prompt[: min(lead, PROMPT_HEAD_CHARS)]  # all the fast stage's head window can hold
    if lead + MODEL_PROMPT_CHARS + len(PROMPT_ELLIPSIS) + PROMPT_TAIL_CHARS >= len(prompt):
        return kept_lead + prompt[lead:]  # long only by its leading whitespace
    head = prompt[lead : lead + MODEL_PROMPT_CHARS]
    return f"{kept_lead}{head}{PROMPT_ELLIPSIS}{prompt[len(prompt) - PROMPT_TAIL_CHARS:]}"


def clip_prompt(prompt: str, head: int = PROMPT_HEAD_CHARS, tail: int = PROMPT_TAIL_CHARS) -> str:
    """The first ``head`` and last ``tail`` characters of a long prompt: where its request and its
    latest words are (what the fast stage reads)."""
    if len(prompt) <= head + tail:
        return prompt
    return f"{prompt[:head]}{PROMPT_ELLIPSIS}{prompt[len(prompt) - tail:]}"


def __getattr__(name: str) -> int:
    if name == "DAEMON_MAX_ROOT_ENTRIES":
        from memory_store import MAX_ROOT_ENTRIES

        return MAX_ROOT_ENTRIES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
