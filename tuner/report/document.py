"""A small document model rendered two ways, Markdown and one self-contained HTML file (PNGs
inlined, its own CSS and sort script: it opens from disk with no server), and the cell
formatting every table of the report and the ablation shares.

User text (names, categorical values, error messages) enters a paragraph through :func:`user`,
and every table cell is user text: both renderings escape it, so ``<script>`` or ``**`` in a
name is shown as written. Markup (``**bold**``, ```code```) belongs to the report's own words.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tuner.stats import Change
from tuner.units import as_number, format_bytes, interval_text, ratio_bound_text

__all__ = [
    "Details",
    "Image",
    "Section",
    "Table",
    "change_text",
    "code",
    "estimate_text",
    "inline_html",
    "markdown_table",
    "md_escape",
    "md_text",
    "render_html",
    "render_markdown",
    "user",
]


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    sortable: bool = False  # HTML: click a header to sort by it


@dataclass(frozen=True)
class Image:
    path: Path
    alt: str
    points: tuple[dict[str, Any], ...] = ()  # what the plot draws: {series, x, y, trial_id}
    legend: tuple[str, ...] = ()  # the series its legend names
    title: str = ""  # the plot's title, which may promise a count


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


# ---- user text and counts -------------------------------------------------------------------

_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use marks around user text inside a paragraph
_USER = re.compile(f"{_OPEN}(.*?){_CLOSE}", re.S)
# The characters that act mid-line: always; "_" only at a word's edge (inside a word, as in
# trial_id, it is no emphasis); a bracket only where it would close a link ("](", "][").
_MARKDOWN_SPECIAL = re.compile(r"([\\`*|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|(?<=\])[(\[])")


def user(value: Any) -> str:
    """``value`` marked as user text for a paragraph: rendered escaped, never as markup."""
    return f"{_OPEN}{str(value).replace(_OPEN, '').replace(_CLOSE, '')}{_CLOSE}"


_PLAIN_CODE = re.compile(r"[\w .,:;/@+=~-]*")  # nothing a Markdown or HTML reader acts on


def code(value: Any) -> str:
    """``value`` as a code span: a value shown as it is (a name, a path), never a claim. A value
    with markup in it (a hostile space name) is user text instead: a code span would keep its
    ``<script>`` raw in report.md."""
    text = str(value)
    return f"`{text}`" if _PLAIN_CODE.fullmatch(text) else user(text)


def md_escape(text: str) -> str:
    """Plain text for Markdown: HTML's three characters as entities, Markdown's with a
    backslash, line breaks as spaces (a cell or a paragraph stays one)."""
    text = html.escape(" ".join(text.splitlines()), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def md_text(text: str) -> str:
    return _USER.sub(lambda m: md_escape(m.group(1)), text)


def _plain(text: str) -> str:
    return _USER.sub(lambda m: m.group(1), text)


# ---- cells -----------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    """One table cell: short floats, integers stay integers, missing is blank."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float | np.floating) and math.isnan(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return _plain(str(value))


def estimate_text(row: Mapping[str, Any], column: str, spec: str) -> str:
    """``median [low–high]`` from a row holding ``column``, ``column_low``, ``column_high``.

    ``spec`` is a format spec, or ``"bytes"`` for MiB/GiB.
    """
    median, low, high = (as_number(row.get(f"{column}{s}")) for s in ("", "_low", "_high"))
    if math.isnan(median):
        return "n/a"
    show = format_bytes if spec == "bytes" else (lambda v: format(v, spec))
    if math.isnan(low) or math.isnan(high) or low == high == median:
        return show(median)
    return f"{show(median)} {interval_text(low, high, show)}"


def change_text(row: Mapping[str, Any], key: str, spec: str = "") -> str:
    """A paired change with its interval: ``1.12x [1.03–1.22]``, ``+3.0 MiB``, ``-1.2 pts``.

    The kind follows the key: ``*_ratio*`` is a ratio, ``*bytes*`` a memory difference, else an
    accuracy difference in percentage points. Inside the noise, with a narrow interval, it
    reads ``tie (...)``; an interval that says nothing reads ``says nothing (...)``, never a tie
    (the one rule: :attr:`tuner.stats.Change.verdict`).
    """
    value, low, high = (as_number(row.get(f"{key}{s}")) for s in ("", "_low", "_high"))
    if math.isnan(value):
        return ""

    def show(v: float) -> str:
        if "ratio" in key:
            return f"{v:.2f}x"
        if "bytes" in key:
            return ("+" if v >= 0 else "-") + format_bytes(abs(v))
        return f"{100 * v:+.1f} pts"

    text = show(value)
    if math.isnan(low) or math.isnan(high):
        return f"{text} (no interval)"  # no verdict without evidence
    if not low == high == value:
        text += " " + interval_text(low, high, ratio_bound_text if "ratio" in key else show)
    verdict = Change.from_row(row, key).verdict
    return {"tie": f"tie ({text})", "uninformative": f"says nothing ({text})"}.get(verdict, text)


# ---- rendering -------------------------------------------------------------------------------


def render_markdown(title: str, sections: list[Section], lead: Sequence[Block] = ()) -> str:
    parts = [f"# {md_text(title)}\n", *(_md_block(block) for block in lead)]
    for number, section in enumerate(sections, 1):
        parts.append(f"## {number}. {md_text(section.title)}\n")
        parts.extend(_md_block(block) for block in section.blocks)
    return "\n".join(parts)


def render_html(title: str, sections: list[Section], lead: Sequence[Block] = ()) -> str:
    body = [f"<h1>{inline_html(title)}</h1>", *(_html_block(block) for block in lead)]
    for number, section in enumerate(sections, 1):
        anchor = f" id='{html.escape(section.anchor)}'" if section.anchor else ""
        body.append(f"<section{anchor}><h2>{number}. {inline_html(section.title)}</h2>")
        body.extend(_html_block(block) for block in section.blocks)
        body.append("</section>")
    return _PAGE.format(title=html.escape(_plain(title)), body="\n".join(body), script=_SORT)


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(md_escape(str(c)) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = [
        "| " + " | ".join(md_escape(_fmt(v)) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows])


def _md_block(block: Block) -> str:
    if isinstance(block, Details):
        inner = "\n".join(_md_block(b) for b in block.blocks)
        summary = html.escape(_plain(block.summary))
        return f"<details><summary>{summary}</summary>\n\n{inner}\n</details>\n"
    if isinstance(block, Table):
        caption = f"*{md_text(block.caption)}*\n\n" if block.caption else ""
        return f"{caption}{'(none)' if block.frame.empty else markdown_table(block.frame)}\n"
    if isinstance(block, Image):
        return f"![{block.alt}]({block.path.name})\n"
    return f"{md_text(block)}\n"


def _html_block(block: Block) -> str:
    if isinstance(block, Details):
        inner = "\n".join(_html_block(b) for b in block.blocks)
        return f"<details><summary>{inline_html(block.summary)}</summary>{inner}</details>"
    if isinstance(block, Table):
        caption = f"<p class='caption'>{inline_html(block.caption)}</p>" if block.caption else ""
        if block.frame.empty:
            return f"{caption}<p>(none)</p>"
        cells = block.frame.map(_fmt)
        classes = ["sortable"] if block.sortable else None
        table = cells.to_html(index=False, escape=True, border=0, classes=classes)
        return f"{caption}<div class='scroll'>{table}</div>"
    if isinstance(block, Image):
        data = base64.b64encode(block.path.read_bytes()).decode("ascii")
        points = html.escape(json.dumps(list(block.points)), quote=True)
        legend = html.escape(json.dumps(list(block.legend)), quote=True)
        return (
            f"<img alt='{html.escape(block.alt, quote=True)}' data-points='{points}' "
            f"data-legend='{legend}' data-title='{html.escape(block.title, quote=True)}' "
            f"src='data:image/png;base64,{data}'>"
        )
    lines = block.splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        return "<ul>" + "".join(f"<li>{inline_html(line[2:])}</li>" for line in lines) + "</ul>"
    return f"<p>{inline_html(block)}</p>"


def inline_html(text: str) -> str:
    """The report's own markup (bold, code) as HTML; user text escaped and left unformatted."""
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(html.escape(match.group(1)))
        return f"{_OPEN}{len(held) - 1}{_CLOSE}"

    escaped = html.escape(_USER.sub(hold, text))
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", escaped)
    return re.sub(f"{_OPEN}(\\d+){_CLOSE}", lambda m: held[int(m.group(1))], escaped)


# Sort a table.sortable by the clicked header: numbers as numbers (commas ignored), else text.
_SORT = """
document.querySelectorAll('table.sortable th').forEach((th, col) => {
  th.style.cursor = 'pointer';
  th.addEventListener('click', () => {
    const body = th.closest('table').tBodies[0];
    const up = th.dataset.order !== 'up';
    th.dataset.order = up ? 'up' : 'down';
    const key = r => r.cells[col].textContent.trim();
    const num = t => (t === '' || isNaN(t.replace(/,/g, ''))) ? null : +t.replace(/,/g, '');
    [...body.rows].sort((a, b) => {
      const [x, y] = [key(a), key(b)], [nx, ny] = [num(x), num(y)];
      const c = nx !== null && ny !== null ? nx - ny : x.localeCompare(y);
      return up ? c : -c;
    }).forEach(r => body.appendChild(r));
  });
});
"""


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
<script>{script}</script>
</body></html>
"""
