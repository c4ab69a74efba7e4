"""The reports of ``tuner bench`` (the ladder with MFU: ``engine_{cpu,cuda}.{json,md}``) and
``tuner bench --verify`` (the engine vs a minimal loop: ``fidelity_{cpu,cuda}.{json,md}``); the
measuring is :mod:`tuner.compare.bench` and :mod:`tuner.compare.fidelity`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tuner.compare.fidelity import KINDS, rate
from tuner.stats import INTERVAL_RULE, Change
from tuner.units import as_number, format_bytes, interval_text, ratio_text

__all__ = ["bench_markdown", "verify_markdown", "write_bench", "write_verify"]


def write_bench(report: dict[str, Any], out_dir: Path) -> Path:
    """``engine_{cpu,cuda}.json`` and ``.md`` in ``out_dir``; the Markdown file's path."""
    return _write(report, Path(out_dir), "engine_cuda" if report["cuda"] else "engine_cpu",
                  bench_markdown(report))  # fmt: skip


def write_verify(report: dict[str, Any], out_dir: Path) -> Path:
    """``fidelity_{cpu,cuda}.json`` and ``.md`` in ``out_dir``; the Markdown file's path."""
    cuda = report["environment"]["device"].startswith("cuda")
    return _write(report, Path(out_dir), "fidelity_cuda" if cuda else "fidelity_cpu",
                  verify_markdown(report))  # fmt: skip


def _write(report: dict[str, Any], out_dir: Path, stem: str, markdown: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    path = out_dir / f"{stem}.md"
    path.write_text(markdown)
    return path


def _ratio(row: dict[str, Any], label: str) -> str:
    key = f"throughput_ratio_vs_{label}"
    if row.get(key) is None:
        return ""
    said = {"tie": " (tie)", "uninformative": " (says nothing)"}
    verdict = Change.from_row(row, key).verdict
    return ratio_text(row[key], row.get(f"{key}_low"), row.get(f"{key}_high")) + said.get(
        verdict, ""
    )


def _spread(row: dict[str, Any], ips: float) -> str:
    low, high = row["images_per_second_low"] or ips, row["images_per_second_high"] or ips
    return interval_text(low, high, "{:,.1f}".format)


def bench_markdown(report: dict[str, Any]) -> str:
    """``tuner bench``'s report as Markdown: setup, one row per rung, fallbacks, the fastest."""
    env, rows, cfg = report["environment"], report["rows"], report["config"]
    cuda = bool(report["cuda"])
    lines = [
        f"# Engine benchmark: {cfg['model']} at {cfg['img_size']} px",
        "",
        f"Device: {env['device']} ({env['device_name']}), torch {env['torch_version']}, "
        f"CUDA {env['cuda_version']}, timm {env['timm_version']}. Data: {cfg['data']}, batch "
        f"{cfg['batch_size']}, {cfg['steps']} measured steps after {cfg['warmup_steps']} warm-up "
        f"steps, {report['repeats']} interleaved repeats. images/s: median [interval of the "
        "median over repeats]; ratios: paired, geometric mean [95% t-interval]; '(tie)': the "
        "interval contains 1x and is narrow, the change is inside the noise; '(says nothing)': "
        f"{INTERVAL_RULE}.",
        "",
        f"Training FLOPs/image (3 x forward): {report['train_gflop_per_image']:.4f} GFLOP; dense "
        f"matmul rate measured in this run: bf16 {report['matmul_bf16_tflop_per_s']:.3f} TFLOP/s, "
        f"fp32 {report['matmul_fp32_tflop_per_s']:.3f} TFLOP/s; MFU is against the "
        f"{report['mfu_reference']} rate.",
        "",
        f"| rung | images/s | vs rung before | vs plain | peak memory ({report['memory_kind']}) "
        f"|{' peak allocated |' if cuda else ''} MFU |",
        "|---|---|---|---|---|" + ("---|" if cuda else "") + "---|",
    ]
    for r in rows:
        ips = r["images_per_second"]
        if ips is None:
            lines.append(f"| {r['arm']} | {r['failed'] or 'failed'} |||||" + ("|" if cuda else ""))
            continue
        allocated = f" {format_bytes(r.get('peak_memory_allocated_bytes'))} |" if cuda else ""
        lines.append(
            f"| {r['arm']} | {ips:,.1f} {_spread(r, ips)} | {_ratio(r, 'reference')} | "
            f"{_ratio(r, 'baseline')} | {format_bytes(r['peak_memory_bytes'])} |{allocated} "
            f"{r['mfu']:.1%} |"
        )
    fell_back = sorted({r["fell_back"] for r in rows if r["fell_back"]})
    if fell_back or report["left_out"]:
        lines += ["", "Fallbacks and rungs left out on this device:"]
        lines += [f"- {n}" for n in [*report["left_out"], *fell_back]]
    if report["best_rung"] is not None:
        lines += [
            "",
            f"Fastest rung: {report['best_rung']} at "
            f"{report['best_ratio_vs_plain'] or 1.0:.2f}x the plain loop, MFU "
            f"{report['best_mfu']:.1%}.",
            "",
        ]
    return "\n".join(lines)


def verify_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: setup, both rates with their intervals, every pair, verdict."""
    env, cfg = report["environment"], report["config"]
    load = report["load_average_1min"]
    precision = "bf16 autocast" if cfg["amp"] == "bf16" else "fp32"
    lines = [
        "# Fidelity self-check: the engine vs a minimal training loop",
        "",
        f"Device: {env['device']} ({env['device_name']}), torch "
        f"{env['torch_version']}, CUDA {env['cuda_version']}, timm {env['timm_version']}. Model "
        f"`{cfg['model']}` {cfg['model_kwargs'] or ''} at {cfg['img_size']} px, batch "
        f"{cfg['batch_size']}, {precision}; {report['steps']} timed steps after "
        f"{cfg['warmup_steps']} warm-up steps, each run a fresh process with "
        f"{report['threads_per_process']} CPU thread(s), {report['repeats']} interleaved "
        "pairs (engine, minimal) after one discarded pair.",
        "",
        f"Machine load (1-minute load average) before/after: {load['before']:.1f} / "
        f"{load['after']:.1f} on {report['cpu_count']} cores; a load above the core count "
        "means other work shared the cores, which the pairing absorbs only as extra noise.",
        "",
        "| loop | images/s: median [interval of the median] |",
        "|---|---|",
    ]
    for kind in KINDS:
        e = report["images_per_second"][kind]
        spread = interval_text(e["low"], e["high"], "{:,.1f}".format)
        median = f"{as_number(e['median']):,.1f}" + (f" {spread}" if spread else "")
        lines.append(f"| {kind} | {median} (n={e['n']}) |")
    lines += ["", "| pair | engine images/s | minimal images/s | engine/minimal |"]
    lines += ["|---|---|---|---|"]
    pairs: dict[int, dict[str, float]] = {}
    for run in report["runs"]:
        pairs.setdefault(run["repeat"], {})[run["kind"]] = as_number(rate(run))
    for repeat, pair in sorted(pairs.items()):
        engine, minimal = pair.get("engine", math.nan), pair.get("minimal", math.nan)
        lines.append(f"| {repeat + 1} | {engine:,.1f} | {minimal:,.1f} | {engine / minimal:.3f} |")
    planned = report["repeats_planned"]
    if report["repeats"] < planned:
        ran = f"Only {report['repeats']} of the {planned} planned pairs ran"
        lines += ["", f"{ran}: the check's time limit would have been passed."]
    lines += ["", report["verdict"], ""]
    return "\n".join(lines)
