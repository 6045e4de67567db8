"""A markdown report (a configuration's or a model's README) as one HTML page with its
plots embedded: Snakemake's HTML report shows HTML, images and PDFs in place and offers
any other file, markdown included, only as a download; and it shows an HTML result in a
frame of its own, where a relative image path has nothing to resolve against."""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path
from urllib.parse import urlparse

from markdown_it import MarkdownIt

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #1f2328; }
table { border-collapse: collapse; margin: 0.8em 0; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; white-space: nowrap; }
th { background: #f6f8fa; }
img { max-width: 100%; }
code { background: #f6f8fa; padding: 0 3px; }
"""


# The page: its title (the README's first heading), STYLE, the README rendered
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}</body>
</html>
"""


def html_page(markdown: str, folder: Path, name: str) -> str:
    """The page of a README's `markdown` (its images, relative to `folder`, embedded);
    titled by its first heading, else by `name`."""
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = parser.parse(markdown)
    title = next((tokens[i + 1].content for i, token in enumerate(tokens)
                  if token.type == "heading_open"), name)
    for token in tokens:
        if token.type == "inline" and token.children:
            token.children = _embedded(token.children, folder)
    body = parser.renderer.render(tokens, parser.options, {})
    return PAGE.format(title=html.escape(title), style=STYLE, body=body)


def _is_relative(url: str) -> bool:
    return not urlparse(url).scheme and not url.startswith(("#", "/"))


def _embedded(children: list, folder: Path) -> list:
    """An inline run's images as data URIs; its links to files beside the README kept as
    their text (in the report's frame, and in the page moved anywhere, they lead nowhere)."""
    kept, in_local_link = [], False
    for child in children:
        if child.type == "image" and _is_relative(src := str(child.attrGet("src"))):
            child.attrSet("src", _data_uri(folder / src))
        elif child.type == "link_open" and _is_relative(str(child.attrGet("href"))):
            in_local_link = True
            continue
        elif child.type == "link_close" and in_local_link:
            in_local_link = False
            continue
        kept.append(child)
    return kept


def _data_uri(path: Path) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"the report shows {path}, which does not exist")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"
