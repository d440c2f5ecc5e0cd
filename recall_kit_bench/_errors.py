"""The harness's errors, under the one root ``RecallKitError``."""

from memory_store import RecallKitError

BENCH_EXTRA = "recall-kit[bench]"  # the extra that installs the harness's optional dependencies


class BaselineUnavailable(RecallKitError):
    """The plain BM25 baseline cannot run: rank-bm25, from the ``bench`` extra, is not installed."""
