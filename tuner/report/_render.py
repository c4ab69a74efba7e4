"""A small document model rendered two ways: Markdown, and one self-contained HTML file.

The HTML embeds every PNG as base64 and carries its own CSS, so it opens from disk or an
e-mail attachment with no server and no other file.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tuner.report._tables import fmt

__all__ = ["Image", "Section", "Table", "render_html", "render_markdown"]


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""


@dataclass(frozen=True)
class Image:
    path: Path
    alt: str


Block = str | Table | Image  # a str is a paragraph; lines starting with "- " are a list


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


def render_markdown(title: str, sections: list[Section]) -> str:
    parts = [f"# {title}\n"]
    for number, section in enumerate(sections, 1):
        parts.append(f"## {number}. {section.title}\n")
        for block in section.blocks:
            parts.append(_md_block(block))
    return "\n".join(parts)


def render_html(title: str, sections: list[Section]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>"]
    for number, section in enumerate(sections, 1):
        body.append(f"<h2>{number}. {html.escape(section.title)}</h2>")
        body.extend(_html_block(block) for block in section.blocks)
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
    if isinstance(block, Table):
        caption = f"*{block.caption}*\n\n" if block.caption else ""
        if block.frame.empty:
            return f"{caption}(none)\n"
        return f"{caption}{markdown_table(block.frame)}\n"
    if isinstance(block, Image):
        return f"![{block.alt}]({block.path.name})\n"
    return f"{block}\n"


def _html_block(block: Block) -> str:
    if isinstance(block, Table):
        caption = f"<p class='caption'>{_inline(block.caption)}</p>" if block.caption else ""
        if block.frame.empty:
            return f"{caption}<p>(none)</p>"
        cells = block.frame.map(fmt)
        return caption + cells.to_html(index=False, escape=True, border=0)
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
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 7px; text-align: right; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; margin: 0.5em 0; }}
code {{ background: #f3f3f3; padding: 0 3px; }}
.caption {{ font-style: italic; margin-bottom: 0; }}
</style></head>
<body>
{body}
</body></html>
"""
