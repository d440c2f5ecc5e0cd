"""`bench delivery --plot`: strict delivery and negative silence per kind, and the initial waits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from recall_kit_bench._reports import DeliveryBenchReport, DeliveryReport
from recall_kit_bench._errors import PLOT_EXTRA, HarnessError, PlotUnavailable

PLOT_SUFFIX = ".png"


def check_plot_path(path: str | Path) -> Path:
    """``path`` as a place :func:`plot_delivery` can write, checked before any benchmark runs.

    Raises PlotUnavailable without matplotlib (the ``plot`` extra), and HarnessError for a name not
    ending in .png, a folder that does not exist or cannot be written, or a path that is a folder."""
    _pyplot()
    out = Path(path)
    if out.suffix.lower() != PLOT_SUFFIX:
        raise HarnessError(f"the plot is a PNG: give a file name ending in {PLOT_SUFFIX}")
    if out.is_dir():
        raise HarnessError("is a folder, not a file")
    folder = out.parent
    if not folder.is_dir():
        raise HarnessError(f"no folder {folder} to write it in")
    if not os.access(folder, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise HarnessError(f"cannot write in {folder}" if not out.exists() else "the file cannot be written")
    return out


def _pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend; PlotUnavailable without the plot extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: files only
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(
            f"drawing needs matplotlib, which is not installed: pip install '{PLOT_EXTRA}' ({exc})"
        ) from None
    return plt


def plot_delivery(report: DeliveryBenchReport, path: str | Path) -> Path:
    """Write a PNG: per kind, strict delivery (answerable kinds) or silence (negatives) for ours,
    unenriched ours when measured, and the plain baseline when it ran; beside it the initial-wait distribution.

    Raises what :func:`check_plot_path` raises, which a caller should call before the benchmark."""
    out = check_plot_path(path)
    plt = _pyplot()
    series: list[tuple[str, DeliveryReport]] = [("ours", report.delivery)]
    if report.unenriched is not None:
        series = [("ours, enriched", report.delivery), ("ours, unenriched", report.unenriched)]
    if report.baseline is not None:  # absent without rank-bm25
        series.append(("plain BM25 top 2", report.baseline))
    kinds = sorted(report.delivery.by_kind)
    figure, (rates, waits) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / len(series)
    for i, (label, part) in enumerate(series):
        values = [_rate(part, kind) for kind in kinds]
        rates.bar([k + i * width for k in range(len(kinds))], values, width, label=label)
    rates.set_xticks([k + width * (len(series) - 1) / 2 for k in range(len(kinds))])
    rates.set_xticklabels([f"{k}\n(silence)" if k == "negative" else k for k in kinds], fontsize=8)
    rates.set_ylim(0, 1.05)
    rates.set_ylabel("strict no-tool delivery (negatives: silence)")
    rates.set_title(Path(report.delivery.dataset).name)
    rates.legend(fontsize=8, loc="lower right")
    waited = list(report.delivery.waits_ms)
    waits.hist(waited, bins=40, color="tab:gray")
    waits.set_xlabel("initial wait, ms")
    waits.set_ylabel("turns")
    waits.set_title(f"p50 {report.delivery.initial_wait_ms.p50:.2f} ms, max {report.delivery.initial_wait_ms.max:.2f} ms")
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return out


def _rate(part: DeliveryReport, kind: str) -> float:
    metrics: Any = part.by_kind.get(kind)
    if metrics is None:
        return 0.0
    value = metrics.negative_silence if kind == "negative" else metrics.strict_delivery
    return float(value or 0.0)
