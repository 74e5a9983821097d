"""A stand-in for the part of ``requests`` the pytorch/examples ports use (the tests reach no
network): ``get(url, stream=True)`` of Cora's address answers with a gzipped tar of a synthetic
citation graph in Cora's format, built here; any other address raises ConnectionError.

The graph: 1,800 papers (Cora's program keeps 1,000 for testing and 500 for validation, so it needs
more than 1,500), 7 classes, 100 binary word features, each class with its own likelier words, and
about 3,000 citations, most of them within a class, so that a graph network has something to learn.
A few papers have no words (the program handles a zero feature sum) and a few citations repeat.
"""

from __future__ import annotations

import io
import tarfile

import numpy as np

__all__ = ["ConnectionError", "get", "CORA_URL"]

CORA_URL = "https://linqs-data.soe.ucsc.edu/public/lbc/cora.tgz"
PAPERS, CLASSES, WORDS, CITATIONS = 1800, 7, 100, 3000


class ConnectionError(OSError):  # noqa: A001 - requests' name
    """No network here: only Cora's address is served."""


class _Response:
    def __init__(self, body: bytes) -> None:
        self.raw = io.BytesIO(body)
        self.status_code = 200

    def __enter__(self) -> "_Response":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.raw.close()


def cora_files(seed: int = 0) -> dict[str, str]:
    """The text of ``cora.content`` and ``cora.cites`` for the synthetic graph."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(10_000, 1_000_000), size=PAPERS, replace=False)
    labels = rng.integers(0, CLASSES, size=PAPERS)
    likely = rng.random((CLASSES, WORDS)) < 0.15
    words = rng.random((PAPERS, WORDS)) < np.where(likely[labels], 0.35, 0.03)
    words[rng.choice(PAPERS, size=5, replace=False)] = False
    names = [f"Class_{c}" for c in range(CLASSES)]
    content = "".join(f"{paper}\t" + "\t".join(map(str, row.astype(int))) + f"\t{names[label]}\n"
                      for paper, row, label in zip(ids, words, labels))
    cited = rng.integers(0, PAPERS, size=CITATIONS)
    same_class = rng.random(CITATIONS) < 0.8
    citing = np.where(same_class, [rng.choice(np.flatnonzero(labels == labels[c])) for c in cited],
                      rng.integers(0, PAPERS, size=CITATIONS))
    cites = "".join(f"{ids[a]}\t{ids[b]}\n" for a, b in zip(cited, citing))
    return {"cora/cora.content": content, "cora/cora.cites": cites}


def _cora_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in cora_files().items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def get(url: str, stream: bool = False, **kwargs: object) -> _Response:
    """Cora's archive, for Cora's address.

    Raises:
        ConnectionError: any other address.
    """
    if url != CORA_URL:
        raise ConnectionError(f"the requests stand-in serves {CORA_URL} only, not {url}")
    return _Response(_cora_archive())
