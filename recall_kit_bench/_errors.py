"""The harness's errors, under the one root ``RecallKitError``."""

from memory_store import RecallKitError

BENCH_EXTRA = "recall-kit[bench]"  # the extra that installs the harness's optional dependencies
PLOT_EXTRA = "recall-kit[plot]"  # the extra that installs matplotlib, for `bench delivery --plot`


class HarnessError(RecallKitError):
    """A benchmark could not run as asked (a dataset that is not one, a missing extra, a bad option)."""


class DatasetError(HarnessError, FileNotFoundError):
    """A folder is not an eval dataset, or its enrichment sidecar is missing."""


class BaselineUnavailable(HarnessError):
    """The plain BM25 baseline cannot run: rank-bm25, from the ``bench`` extra, is not installed."""


class PlotUnavailable(HarnessError):
    """Drawing needs matplotlib, from the ``plot`` extra."""
