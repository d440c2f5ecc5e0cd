"""The evaluation and benchmark harness: datasets (read and written), delivery metrics, observed turns, reports.

Imported only by the benchmarks, the tests and the CLI's ``bench`` commands; the engine never
imports it.
"""

from memory_store import fixup_module_metadata
from recall_kit_bench._datasets import (
    DATASET_SCOPE,
    EvalDataset,
    EvalQuery,
    MemorySpec,
    QuerySpec,
    dataset_sidecar,
    load_dataset,
    write_eval_dataset,
    write_memory,
)
from recall_kit_bench._errors import BaselineUnavailable, DatasetError, HarnessError, PlotUnavailable
from recall_kit_bench._evaluation import (
    BASELINE_TOP,
    Metrics,
    Percentiles,
    PlainBaseline,
    QueryOutcome,
    enriched_docs,
    fast_deliver,
    fold_of,
    metrics,
    metrics_by_fold,
    metrics_by_kind,
    percentiles,
    run,
)
from recall_kit_bench._enriched_latency import (
    EnrichedLatencyRow,
    HeadSize,
    enrichment_vocabulary,
    generated_enrichment,
    measure_enriched_latency,
    read_generated_store,
    write_enriched_store,
)
from recall_kit_bench._latency import (
    LatencyRow,
    generated_queries,
    generated_snapshot,
    generated_vocabulary,
    measure_latency,
)
from recall_kit_bench._lifecycle import (
    BlockingReport,
    LifecycleReport,
    ScriptedServerProcess,
    ToolFreeReport,
    ToolUsingReport,
    run_lifecycle_bench,
)
from recall_kit_bench._plot import check_plot_path, plot_delivery
from recall_kit_bench._replay import (
    FoldResult,
    OracleAnswers,
    ReplayReport,
    ReplaySettings,
    TrainingSummary,
    baseline_fold,
    copy_memories,
    fold_split,
    oracle_answers,
    run_replay,
)
from recall_kit_bench._reports import DeliveryBenchReport, DeliveryReport, RefinedReport, Spread
from recall_kit_bench._tables import delivery_table, enriched_latency_table, latency_table, replay_table
from recall_kit_bench._turn_metrics import RefinementSummary, run_turns, turn_outcomes

__all__ = [
    "BASELINE_TOP",
    "BaselineUnavailable",
    "DatasetError",
    "HarnessError",
    "PlotUnavailable",
    "BlockingReport",
    "DATASET_SCOPE",
    "DeliveryBenchReport",
    "DeliveryReport",
    "EnrichedLatencyRow",
    "EvalDataset",
    "EvalQuery",
    "FoldResult",
    "HeadSize",
    "LatencyRow",
    "LifecycleReport",
    "OracleAnswers",
    "MemorySpec",
    "Metrics",
    "Percentiles",
    "PlainBaseline",
    "QueryOutcome",
    "QuerySpec",
    "RefinedReport",
    "RefinementSummary",
    "ReplayReport",
    "ReplaySettings",
    "ScriptedServerProcess",
    "Spread",
    "ToolFreeReport",
    "ToolUsingReport",
    "TrainingSummary",
    "baseline_fold",
    "check_plot_path",
    "copy_memories",
    "dataset_sidecar",
    "delivery_table",
    "enriched_docs",
    "enriched_latency_table",
    "enrichment_vocabulary",
    "fast_deliver",
    "fold_of",
    "fold_split",
    "generated_enrichment",
    "generated_queries",
    "generated_snapshot",
    "generated_vocabulary",
    "latency_table",
    "load_dataset",
    "measure_enriched_latency",
    "measure_latency",
    "metrics",
    "metrics_by_fold",
    "metrics_by_kind",
    "oracle_answers",
    "percentiles",
    "plot_delivery",
    "read_generated_store",
    "replay_table",
    "run",
    "run_lifecycle_bench",
    "run_replay",
    "run_turns",
    "turn_outcomes",
    "write_enriched_store",
    "write_eval_dataset",
    "write_memory",
]

fixup_module_metadata(__name__, globals(), __all__)
