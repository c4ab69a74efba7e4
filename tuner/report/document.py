"""A small document model rendered two ways, Markdown and one self-contained HTML file, and the
cell formatting every table of the report and the ablation shares.

The HTML embeds every PNG as base64 and carries its own CSS, so it opens from disk or an
e-mail attachment with no server and no other file. Wide tables scroll inside their own box;
:class:`Details` blocks are folded (``<details>``) until opened.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tuner.units import as_number, format_bytes, interval_text

__all__ = [
    "Details",
    "Image",
    "Section",
    "Table",
    "change_text",
    "estimate_text",
    "fmt",
    "markdown_table",
    "render_html",
    "render_markdown",
]


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""


@dataclass(frozen=True)
class Image:
    path: Path
    alt: str


@dataclass(frozen=True)
class Details:
    """Blocks folded under a one-line summary (metadata, long tables)."""

    summary: str
    blocks: list[Any]


Block = str | Table | Image | Details  # a str is a paragraph; lines starting "- " are a list


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    anchor: str = ""  # the HTML id of the section (tests and links find it by this)


# ---- cells -----------------------------------------------------------------------------------


def fmt(value: Any) -> str:
    """One table cell: short floats, integers stay integers, missing is blank."""
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        return ""
    if value is pd.NA:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def estimate_text(row: Mapping[str, Any], column: str, spec: str) -> str:
    """``median [low–high]`` from a row holding ``column``, ``column_low``, ``column_high``.

    ``spec`` is a format spec, or ``"bytes"`` for MiB/GiB.
    """
    median, low, high = (as_number(row.get(f"{column}{s}")) for s in ("", "_low", "_high"))
    if math.isnan(median):
        return "n/a"
    show = format_bytes if spec == "bytes" else (lambda v: format(v, spec))
    if math.isnan(low) or math.isnan(high):
        return show(median)
    if low == high == median:
        return show(median)
    return f"{show(median)} {interval_text(low, high, show)}"


def change_text(row: Mapping[str, Any], key: str, spec: str = "") -> str:
    """A paired change with its interval: ``1.12x [1.03–1.22]``, ``+3.0 MiB``, ``-1.2 pts``.

    The kind follows the key: ``*_ratio*`` is a ratio, ``*bytes*`` a memory difference, else an
    accuracy difference in percentage points. Inside the noise it reads ``tie (...)``.
    """
    value, low, high = (as_number(row.get(f"{key}{s}")) for s in ("", "_low", "_high"))
    if math.isnan(value):
        return ""
    if "ratio" in key:
        show = "{:.2f}x".format
    elif "bytes" in key:

        def show(v: float) -> str:
            return ("+" if v >= 0 else "-") + format_bytes(abs(v))
    else:

        def show(v: float) -> str:
            return f"{100 * v:+.1f} pts"

    text = show(value)
    if math.isnan(low) or math.isnan(high):
        return f"{text} (no interval)"  # no verdict without evidence
    if not low == high == value:
        text += " " + interval_text(low, high, "{:.2f}".format if "ratio" in key else show)
    return f"tie ({text})" if bool(row.get(f"{key}_tie")) else text


# ---- rendering -------------------------------------------------------------------------------


def render_markdown(title: str, sections: list[Section]) -> str:
    parts = [f"# {title}\n"]
    for number, section in enumerate(sections, 1):
        parts.append(f"## {number}. {section.title}\n")
        parts.extend(_md_block(block) for block in section.blocks)
    return "\n".join(parts)


def render_html(title: str, sections: list[Section]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for number, section in enumerate(sections, 1):
        anchor = f" id='{html.escape(section.anchor)}'" if section.anchor else ""
        body.append(f"<section{anchor}><h2>{number}. {html.escape(section.title)}</h2>")
        body.extend(_html_block(block) for block in section.blocks)
        body.append("</section>")
    return _PAGE.format(title=html.escape(title), body="\n".join(body))


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows])


def _md_block(block: Block) -> str:
    if isinstance(block, Details):
        inner = "\n".join(_md_block(b) for b in block.blocks)
        return f"<details><summary>{block.summary}</summary>\n\n{inner}\n</details>\n"
    if isinstance(block, Table):
        caption = f"*{block.caption}*\n\n" if block.caption else ""
        if block.frame.empty:
            return f"{caption}(none)\n"
        return f"{caption}{markdown_table(block.frame)}\n"
    if isinstance(block, Image):
        return f"![{block.alt}]({block.path.name})\n"
    return f"{block}\n"


def _html_block(block: Block) -> str:
    if isinstance(block, Details):
        inner = "\n".join(_html_block(b) for b in block.blocks)
        return f"<details><summary>{_inline(block.summary)}</summary>{inner}</details>"
    if isinstance(block, Table):
        caption = f"<p class='caption'>{_inline(block.caption)}</p>" if block.caption else ""
        if block.frame.empty:
            return f"{caption}<p>(none)</p>"
        cells = block.frame.map(fmt)
        table = cells.to_html(index=False, escape=True, border=0)
        return f"{caption}<div class='scroll'>{table}</div>"
    if isinstance(block, Image):
        data = base64.b64encode(block.path.read_bytes()).decode("ascii")
        return f"<img alt='{html.escape(block.alt)}' src='data:image/png;base64,{data}'>"
    lines = block.splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        return "<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in lines) + "</ul>"
    return f"<p>{_inline(block)}</p>"


def _inline(text: str) -> str:
    escaped = html.escape(text)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; text-align: left; line-height: 1.45; }}
.scroll {{ overflow-x: auto; max-width: 100%; margin: 0.5em 0 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 7px; text-align: left; white-space: nowrap; }}
th {{ background: #f3f3f3; position: sticky; top: 0; }}
img {{ max-width: 100%; margin: 0.5em 0; }}
code {{ background: #f3f3f3; padding: 0 3px; overflow-wrap: anywhere; }}
details {{ margin: 0.5em 0 1em; }}
summary {{ cursor: pointer; color: #245; }}
.caption {{ font-style: italic; margin-bottom: 0; }}
</style></head>
<body>
{body}
</body></html>
"""
