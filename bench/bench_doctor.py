"""What `recall-kit doctor` costs and how well its near-duplicate threshold separates, in one run.

    .venv/bin/python bench/bench_doctor.py [--docs 1000,10000] [--runs 3] [--skip-cost]

1. threshold: on bench/datasets/near-duplicates (clusters of memories, each labelled with the pairs
   that state one fact; the rest of a cluster are same-topic memories stating different facts), a
   grid over the head weight and the cosine threshold, chosen by F1 on the dev half (ties to the
   higher threshold), reported on the held-out half with the pairs it gets wrong.
2. blocking: the blocked near-duplicate search against an exhaustive one (every pair's cosine), on
   the labelled set and on a generated store of 1,000 with 80 planted near-duplicates.
3. screen: memories unreachable at the prompt, every memory through the fast stage against the screen
   a large set uses, on every dataset and the generated stores.
4. cost: check_health on generated stores (bench/generated_store.py) of each --docs size, index cache
   warm (and doctor's own per-file cache warm), median of --runs runs with each check's seconds; the
   first, cold run beside them; and what doctor's line adds to `hook status` on a Claude Code folder
   of agent-memories' 71 memories, beside a live check of that folder (medians of 5).
Prints JSON; docs/benchmarks.md keeps the figures with the load (uptime) they were taken under.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from generated_store import write_store  # noqa: E402

import numpy as np  # noqa: E402

from memory_store import MemoryStore, format_memory, parse_memory  # noqa: E402
from recall_kit import FastHeuristic, open_indexed  # noqa: E402
from recall_kit.health import (  # noqa: E402
    HealthPlan,
    HealthRoot,
    IndexReader,
    RecallSet,
    check_health,
    similar_pairs,
)

LABELLED = REPO / "bench" / "datasets" / "near-duplicates"
HEAD_WEIGHTS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def labelled_pairs() -> tuple[dict[str, str], set[frozenset[str]]]:
    """memory (as a ref) -> its split, and the labelled duplicate pairs."""
    split, duplicates = {}, set()
    for line in (LABELLED / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        for memory in row["memories"]:
            split[f"memories/{memory}"] = row["split"]
        duplicates |= {frozenset((f"memories/{d['a']}", f"memories/{d['b']}")) for d in row["duplicates"]}
    return split, duplicates


def scores(heuristic: FastHeuristic, head_weight: float) -> dict[frozenset[str], float]:
    """Every candidate pair's cosine (pairs the search does not propose score 0)."""
    return {frozenset((p.first, p.second)): p.similarity
            for p in similar_pairs(heuristic.postings(), 0.0, head_weight=head_weight)}


def prf(scored: dict[frozenset[str], float], pairs: list[frozenset[str]], positives: set[frozenset[str]],
        threshold: float) -> dict[str, float]:
    found = {p for p in pairs if scored.get(p, 0.0) >= threshold}
    tp, fp, fn = len(found & positives), len(found - positives), len(positives & set(pairs) - found)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3), "tp": tp, "fp": fp, "fn": fn}


def threshold_search() -> dict[str, Any]:
    split, positives = labelled_pairs()
    with MemoryStore.open(LABELLED / "memories", watch=False) as store:
        heuristic = FastHeuristic(store.snapshot())
    halves = {name: [frozenset(p) for p in itertools.combinations(sorted(r for r, s in split.items() if s == name), 2)]
              for name in ("dev", "held-out")}
    best: tuple[float, float, float] | None = None
    grid = []
    for weight in HEAD_WEIGHTS:
        scored = scores(heuristic, weight)
        for threshold in sorted({round(v, 3) for v in scored.values() if v > 0.05}):
            f1 = prf(scored, halves["dev"], positives, threshold)["f1"]
            grid.append((weight, threshold, f1))
            if best is None or (f1, threshold) > (best[2], best[1]):
                best = (weight, threshold, f1)
    assert best is not None
    weight, threshold, _ = best
    scored = scores(heuristic, weight)
    wrong = sorted(
        (("false positive" if p not in positives else "missed"), round(scored.get(p, 0.0), 3), *sorted(p))
        for p in halves["held-out"] if (scored.get(p, 0.0) >= threshold) != (p in positives)
    )
    return {
        "head_weight": weight, "threshold": threshold,
        "dev": prf(scored, halves["dev"], positives, threshold),
        "held_out": prf(scored, halves["held-out"], positives, threshold),
        "both": prf(scored, halves["dev"] + halves["held-out"], positives, threshold),
        "held_out_wrong": wrong,
        "best_f1_per_head_weight": {w: max(f for ww, _, f in grid if ww == w) for w in HEAD_WEIGHTS},
    }


def exhaustive(heuristic: FastHeuristic, threshold: float) -> set[frozenset[str]]:
    """Every pair at or above ``threshold``, by one dense matrix product over the same vectors."""
    postings = heuristic.postings()
    head = postings.tfs[:, :4].sum(axis=1).astype(float)
    body = postings.tfs[:, 6].astype(float)
    value = 2.0 * np.where(head > 0, 1 + np.log(np.maximum(head, 1)), 0) + np.where(body > 0, 1 + np.log(np.maximum(body, 1)), 0)
    keep = value > 0
    terms, docs = postings.term_ids[keep], postings.doc_ids[keep]
    df = np.bincount(terms, minlength=len(postings.terms))
    matrix = np.zeros((len(postings.refs), len(postings.terms)), dtype=np.float32)
    matrix[docs, terms] = value[keep] * np.log1p(len(postings.refs) / df[terms])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cosine = matrix @ matrix.T
    first, second = np.nonzero(np.triu(cosine >= threshold - 1e-6, 1))
    return {frozenset((postings.refs[a], postings.refs[b])) for a, b in zip(first.tolist(), second.tolist())}


def plant_duplicates(root: Path, count: int, seed: int = 3) -> None:
    """``count`` memories of ``root`` written again as another session might: 40% of the body's lines
    dropped and the rest shuffled, 30% of the description's words changed, the name reversed in half."""
    rng = random.Random(seed)
    for n, path in enumerate(rng.sample(sorted(root.rglob("*.md")), count)):
        doc = parse_memory(path.read_text())
        lines = [line for line in doc.body.strip().split("\n") if rng.random() > 0.4]
        rng.shuffle(lines)
        words = [rng.choice(["update", "note", "remember", "always", "check"]) if rng.random() < 0.3 else w
                 for w in doc.description.split()]
        name = doc.name if n % 2 else " ".join(doc.name.split()[::-1])
        (path.parent / f"planted-{n:03d}.md").write_text(
            format_memory(name=name, description=" ".join(words), type=doc.type, body="\n" + "\n".join(lines)))


def blocking(tmp: Path) -> dict[str, Any]:
    out = {}
    planted = tmp / "planted"
    write_store(planted, 1000)
    plant_duplicates(planted, 80)
    for name, root in (("near-duplicates", LABELLED / "memories"), ("generated 1,000 + 80 planted", planted)):
        with MemoryStore.open(root, watch=False) as store:
            heuristic = FastHeuristic(store.snapshot())
        started = time.perf_counter()
        found = {frozenset((p.first, p.second)) for p in similar_pairs(heuristic.postings())}
        elapsed = time.perf_counter() - started
        every = exhaustive(heuristic, 0.389)
        out[name] = {"exhaustive": len(every), "blocked": len(found), "found_of_exhaustive": len(found & every),
                     "blocked_s": round(elapsed, 3)}
    return out


def screen(roots: dict[str, Path]) -> dict[str, Any]:
    out = {}
    for name, root in roots.items():
        plan = HealthPlan((HealthRoot(str(root)),), (RecallSet(name, (str(root),)),))
        every = check_health(plan, exact_max=10**9)
        screened = check_health(plan, exact_max=0)
        a = {f.files[0] for f in every.findings if f.kind == "unreachable"}
        b = {f.files[0] for f in screened.findings if f.kind == "unreachable"}
        out[name] = {"every_memory": len(a), "screen": len(b), "screen_missed": len(a - b),
                     "every_s": round(every.elapsed_s["unreachable"], 3), "screen_s": round(screened.elapsed_s["unreachable"], 3)}
    return out


def cost(tmp: Path, sizes: list[int], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    project = tmp / "project"
    shutil.copytree(REPO / "recall_kit", project / "recall_kit")  # a project to resolve references in
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    for count in sizes:
        root = tmp / f"store-{count}"
        write_store(root, count)
        plan = HealthPlan((HealthRoot(str(root), "project", IndexReader("Claude Code", 200, 25_000), str(project)),),
                          (RecallSet("generated", (str(root),)),))
        cache = tmp / f"cache-{count}"  # its own: no file of it was seen before, by the index cache or doctor's
        started = time.perf_counter()
        first = check_health(plan, history=[], cache_dir=cache)
        cold = time.perf_counter() - started
        totals, parts = [], []
        for _ in range(runs):
            started = time.perf_counter()
            report = check_health(plan, history=[], cache_dir=cache)
            totals.append(time.perf_counter() - started)
            parts.append(dict(report.elapsed_s))
        out[str(count)] = {
            "cold_s": round(cold, 2), "cold_per_check_s": {k: round(v, 2) for k, v in first.elapsed_s.items()},
            "warm_median_s": round(statistics.median(totals), 2),
            "per_check_median_s": {k: round(statistics.median(p.get(k, 0.0) for p in parts), 2) for k in parts[0]},
            "findings": first.counts(), "notes": list(first.notes),
        }
    return out


def hook_status_cost(tmp: Path, runs: int = 5) -> dict[str, Any]:
    """`hook status` in-process and the doctor line alone (read from doctor's record), on a Claude Code
    folder of agent-memories' 71 memories, beside what a live check of that folder costs."""
    from recall_kit.testing import CLAUDE_CODE, agent_memory_folder
    from recall_kit_cli.integrations.doctor_plan import doctor_plan, doctor_summary
    from recall_kit_cli.integrations.doctor_record import record
    from recall_kit_cli.integrations.hook_status import collect_status

    home, project = tmp / "home", tmp / "status-project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    cwd = str(project.resolve())
    folder = agent_memory_folder(CLAUDE_CODE, home, project.resolve())
    shutil.copytree(REPO / "bench" / "datasets" / "agent-memories" / "memories", folder)
    environ = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(tmp / "run"), "XDG_STATE_HOME": str(tmp / "state")}
    live = []
    for _ in range(runs):
        started = time.perf_counter()
        report = check_health(doctor_plan(cwd, environ).plan, history=[])
        live.append(time.perf_counter() - started)
    record(report, environ)
    status, line_only = [], []
    for _ in range(runs):
        started = time.perf_counter()
        collect_status(cwd, environ)
        status.append(time.perf_counter() - started)
        started = time.perf_counter()
        line = doctor_summary(cwd, environ)
        line_only.append(time.perf_counter() - started)
    whole, doctor = statistics.median(status), statistics.median(line_only)
    return {"hook_status_ms": round(whole * 1000, 1), "of_it_doctor_line_ms": round(doctor * 1000, 2),
            "live_check_of_the_folder_ms": round(statistics.median(live) * 1000, 1), "line": line}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {"load": os.getloadavg()}
    result["threshold"] = threshold_search()
    with tempfile.TemporaryDirectory(prefix="recall-kit-doctor-bench-") as name:
        tmp = Path(name)
        os.environ.setdefault("RECALL_KIT_CACHE_DIR", str(tmp / "cache"))
        result["blocking"] = blocking(tmp)
        datasets = {p.parent.name: p for p in sorted((REPO / "bench" / "datasets").glob("*/memories"))}
        locomo = Path("/work/shared/datasets/locomo-dev/memories")
        if locomo.is_dir():
            datasets["locomo-dev"] = locomo
        datasets["generated 1,000 + 80 planted"] = tmp / "planted"
        result["screen"] = screen(datasets)
        if not args.skip_cost:
            result["cost"] = cost(tmp, [int(n) for n in args.docs.split(",")], args.runs)
            result["hook_status"] = hook_status_cost(tmp)
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
