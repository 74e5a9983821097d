"""References in the docs and the code point at something that exists.

* Docstrings' roles (``:mod:`zgrad.kernels.cpu.sequence```, ``:func:`zgrad.ops.conv.conv2d```,
  ...) name objects of zgrad.
* Markdown links (``[text](path)``, ``[text](path#anchor)``) of README.md, docs/, bench/ and
  examples/ lead to files of this repository, and their anchors to headings of the target.
* File names in docs, docstrings, comments and configs name files of this repository: paths
  from its root (``docs/config.md``, ``configs/secure.toml``, ``zgrad/kernels/cpu/backend.py``, globs such
  as ``tests/kernels/test_cuda_*.py``) and any ``*.md`` file, with or without its folder. Planning notes
  kept outside the repository are not cited, by name or by section number.
"""

from __future__ import annotations

import ast
import glob
import importlib
import importlib.util
import io
import re
import tokenize
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from zgrad.errors import ZgradError
from paths import REPO

ROOT = REPO
PACKAGE = ROOT / "zgrad"
REFERENCE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(zgrad(?:\.\w+)+)`")
SOURCES = sorted(PACKAGE.rglob("*.py"))

DOCS = sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("bench/*.md"), *ROOT.glob("examples/**/*.md")])
PYTHON = sorted(p for folder in ("zgrad", "tests", "bench", "examples", "docs") for p in (ROOT / folder).rglob("*.py"))
CONFIGS = sorted(ROOT.glob("configs/*.toml"))

FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
SCHEME = re.compile(r"[a-zA-Z][\w+.-]*:")
URL = re.compile(r"\b[a-zA-Z][\w+.-]*://\S+")
ROOTED_PATH = re.compile(r"(?<![\w./-])(?:zgrad|tests|bench|docs|configs|examples)/[\w./*-]*\.(?:py|md|toml)\b")
MD_NAME = re.compile(r"[\w-]+\.md\b")
SPEC_SECTION = re.compile(r"SPEC\s*§\s*\d*")


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names (the longest importable module prefix, then attributes), or None."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module = ".".join(parts[:split])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            try:
                target: Any = importlib.import_module(module)
            except (ImportError, ZgradError):  # it exists but needs an optional extra or a device (CUDA)
                return module
            for attribute in parts[split:]:
                target = getattr(target, attribute, None)
            return target
    return None


@cache
def markdown_names() -> frozenset[str]:
    """The file names of the repository's Markdown files."""
    found = {p.name for p in ROOT.glob("*.md")}
    for folder in ("docs", "bench", "examples", "tests", "zgrad"):
        found |= {p.name for p in (ROOT / folder).rglob("*.md")}
    return frozenset(found)


def missing_files(text: str) -> list[str]:
    """What ``text`` names that the repository lacks: paths from its root (globs allowed) and
    ``*.md`` names, outside URLs; and any section number of a spec (the word SPEC, then a section sign)."""
    text = URL.sub(" ", text)
    missing = [path for path in ROOTED_PATH.findall(text) if not glob.glob(str(ROOT / path))]
    missing += [name for name in MD_NAME.findall(ROOTED_PATH.sub(" ", text)) if name not in markdown_names()]
    return missing + SPEC_SECTION.findall(text)


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of the Markdown file ``path`` (``-1``, ``-2`` on repeats)."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for title in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = re.sub(r"[^\w\- ]", "", LINK.sub(r"\1", title).lower()).replace(" ", "-")
        repeats = seen.get(slug, 0)
        seen[slug] = repeats + 1
        anchors.add(f"{slug}-{repeats}" if repeats else slug)
    return anchors


def broken_links(path: Path) -> list[str]:
    """The relative links of the Markdown file ``path`` whose file, or heading, does not exist."""
    prose = INLINE_CODE.sub(" ", FENCE.sub(" ", path.read_text(encoding="utf-8")))
    broken = []
    for _, target in LINK.findall(prose):
        if SCHEME.match(target):
            continue
        file, _, anchor = target.partition("#")
        destination = path.parent / file if file else path
        if not destination.exists():
            broken.append(target)
        elif anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
            broken.append(target)
    return broken


def python_prose(path: Path) -> str:
    """The docstrings and comments of the Python file ``path``."""
    source = path.read_text(encoding="utf-8")
    parts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    parts += [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type == tokenize.COMMENT]
    return "\n".join(parts)


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", SOURCES, ids=label)
def test_docstring_references_resolve(path: Path):
    missing = [ref for ref in REFERENCE.findall(path.read_text(encoding="utf-8")) if resolve(ref) is None]
    assert not missing, f"{path.name} refers to what does not exist: {missing}"


def test_resolver_finds_a_missing_module():
    assert resolve("zgrad.kernels.cpu.sequence.lstm_forward") is not None
    assert resolve("zgrad.kernels.cpu_recurrent") is None
    assert resolve("zgrad.kernels.cpu.kernels.norm.task_count") is None


@pytest.mark.parametrize("path", DOCS, ids=label)
def test_markdown_links_lead_somewhere(path: Path):
    broken = broken_links(path)
    assert not broken, f"{label(path)} links to what does not exist: {broken}"


@pytest.mark.parametrize("path", DOCS + PYTHON + CONFIGS, ids=label)
def test_files_named_in_prose_exist(path: Path):
    text = python_prose(path) if path.suffix == ".py" else path.read_text(encoding="utf-8")
    missing = missing_files(text)
    assert not missing, f"{label(path)} names what the repository does not hold: {missing}"


def test_checkers_find_what_is_missing(tmp_path):
    text = ("See ARCHITECTURE.md, STYLE.md (guideline 5), SPEC.md and SPEC §4; docs/transport.md, "
            "`docs/nowhere.md`, configs/none.toml, bench/gone.py, tests/kernels/test_cuda_*.py, "
            "zgrad/kernels/cpu_recurrent.py and https://example.com/NOTES.md.")
    assert missing_files(text) == ["docs/nowhere.md", "configs/none.toml", "bench/gone.py", "zgrad/kernels/cpu_recurrent.py",
                                   "ARCHITECTURE.md", "STYLE.md", "SPEC.md", "SPEC §4"]
    doc = tmp_path / "doc.md"
    doc.write_text("## A `heading`, twice\n\n## A `heading`, twice\n\n```\n# not a heading\n```\n"
                   "[ok](doc.md#a-heading-twice) [ok](#a-heading-twice-1) [web](https://example.com/x.md) "
                   "[gone](other.md) [no heading](doc.md#not-a-heading) [no repeat](#a-heading-twice-2) "
                   "`[code](nowhere.md)`\n", encoding="utf-8")
    assert broken_links(doc) == ["other.md", "doc.md#not-a-heading", "#a-heading-twice-2"]
