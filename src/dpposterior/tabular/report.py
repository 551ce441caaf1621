"""A report folder: the same content as Markdown (figures beside it) and as one self-contained HTML
file (figures embedded as data URIs, so it opens anywhere, offline). Post-processing only."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Sequence

from .._io import write_bytes_atomic

_CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}th,td{border:1px solid #bbb;padding:3px 8px;
text-align:right}th{background:#eee}td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}figcaption{font-size:0.9em;color:#555}
.note{background:#fff8e0;border-left:4px solid #e0b000;padding:0.4em 0.8em}code{background:#f3f3f3}"""


class Report:
    """An ordered list of blocks (headings, paragraphs, bullet lists, tables, figures) written as
    ``summary.md`` and ``summary.html`` into a folder."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.blocks: list[tuple[str, Any]] = []

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def paragraph(self, text: str, note: bool = False) -> None:
        self.blocks.append(("note" if note else "p", text))

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        self.blocks.append(("table", (list(header), [[_cell(c) for c in r] for r in rows])))

    def figure(self, path: str | Path, caption: str) -> None:
        self.blocks.append(("figure", (Path(path), caption)))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for kind, val in self.blocks:
            if kind == "h2":
                out += [f"## {val}", ""]
            elif kind in ("p", "note"):
                out += [f"> {val}" if kind == "note" else val, ""]
            elif kind == "ul":
                out += [f"- {v}" for v in val] + [""]
            elif kind == "table":
                header, rows = val
                out.append("| " + " | ".join(header) + " |")
                out.append("|" + "|".join("---" for _ in header) + "|")
                out += ["| " + " | ".join(r) + " |" for r in rows]
                out.append("")
            elif kind == "figure":
                path, caption = val
                out += [f"![{caption}]({path.name})", "", f"*{caption}*", ""]
        return "\n".join(out)

    def html(self) -> str:
        e = html.escape
        out = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{e(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{e(self.title)}</h1>",
        ]
        for kind, val in self.blocks:
            if kind == "h2":
                out.append(f"<h2>{e(val)}</h2>")
            elif kind == "p":
                out.append(f"<p>{e(val)}</p>")
            elif kind == "note":
                out.append(f'<p class="note">{e(val)}</p>')
            elif kind == "ul":
                out.append("<ul>" + "".join(f"<li>{e(v)}</li>" for v in val) + "</ul>")
            elif kind == "table":
                header, rows = val
                out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>")
                out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows]
                out.append("</tbody></table>")
            elif kind == "figure":
                path, caption = val
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                out.append(
                    f'<figure><img alt="{e(caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{e(caption)}</figcaption></figure>"
                )
        out.append("</body></html>")
        return "\n".join(out)

    def write(self, folder: str | Path) -> tuple[Path, Path]:
        """Writes ``summary.md`` and ``summary.html`` into ``folder`` (atomically); returns both paths."""
        folder = Path(folder)
        md = write_bytes_atomic(folder / "summary.md", self.markdown().encode("utf-8"))
        page = write_bytes_atomic(folder / "summary.html", self.html().encode("utf-8"))
        return md, page


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")
