"""What a starting gateway answers ``find_tools`` with: its last tool table, ranked by full text.

A gateway on an existing registry needs seconds before its own search can run: importing LanceDB
(1-5 s), opening the registry and loading the embedding model (1-2 s more) take far longer than a
client gives its first request, and a model told "still starting" spends its first steps asking
again. So each gateway leaves, beside a local registry, the table a first answer needs
(``READY_FILE``: every tool a session could be shown, with its public name, the entry a
``find_tools`` answer gives it, and the text the registry indexes for it), rewritten only when that
changes. Until the registry and the embedding model are up, ``find_tools`` is answered from it by
BM25 over those texts: by the stdio front (``server/fronts/early.py``) and the HTTP front
(``server/fronts/http_front.py``) before the MCP SDK is even imported, and by the gateway itself
(``server/turns/starting.py``) until it is warm. The answer is an ordinary one: nothing in it asks the
client to call again. The found tools are published by the gateway (a front's answered request is
replayed into it), and a call of one waits for its upstream within the call's own budget.

The table also carries what the gateway's own first pass needs that LanceDB would give
(``SEARCH_KEY``: the embedding model, the walkable dependency edges, the tools' own names, sources and
destructive flags) and, in ``VECTORS_FILE`` beside it, the tools' vectors in table order (float16). Once
a background thread has loaded the query encoder (``server/turns/ready_rank.py``, well before LanceDB's
import), ``ReadyIndex.answer`` ranks through the product's own pipeline over them (``ranker``); until
then, and for a table whose model is not the configured one, by BM25.

Standard library only: the fronts load it before anything heavy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolweave.names import stem
from toolweave.server.calls.coerce import integer_text
from toolweave.server.fronts.handshake import MAX_K

if TYPE_CHECKING:
    from toolweave.settings import Settings

__all__ = [
    "ANY_SHIPPED_MODEL",
    "READY_FILE",
    "SEARCH_KEY",
    "VECTORS_FILE",
    "Ranking",
    "ReadyIndex",
    "ReadyTool",
    "answer_document",
    "call_result",
    "configured_model",
    "drop_ranker",
    "load",
    "plain_find_query",
    "rank_in_background",
    "ready_path",
    "vectors_path",
    "write",
]

log = logging.getLogger(__name__)

READY_FILE = "ready-tools.json"
"""Beside the registry's own files (local registries only: an object store has no place for it)."""
VECTORS_FILE = "ready-vectors.f16"
"""The tools' vectors, float16 little-endian, one row per tool in the table's order (``SEARCH_KEY``
names their model, dimension and sha256: a file that does not match is not used)."""
SEARCH_KEY = "search"
FORMAT = 1
PUBLISH_SHARE = 0.5
"""A hit whose BM25 score is at least this share of the best one's is published (offered in ``tools``);
the rest are named in ``also_found``, as the gateway's relevance floor does."""
MAX_PUBLISHED = 5
SMALL_FLEET = 5
"""A table of fewer tools publishes every hit, as the gateway's relevance floor does for fewer candidates
(``retrieval/floor.py`` ``MIN_CANDIDATES``; a test keeps them equal): in a fleet of two time tools, BM25
scored the time tool below half of ``convert_time`` (only the latter's text says "Tokyo") and the early
answer offered one tool where the gateway offers both."""
MAX_QUERY_CHARS = 2000
"""A longer query is left to the gateway (it searches only the query's head and says so)."""
_K1, _B = 1.2, 0.75
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "that",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "with",
        "you",
        "your",
    ]
)


def terms(text: str) -> list[str]:
    """The stemmed words of ``text`` that carry meaning (the same on both sides)."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP]


def ready_path(home: str | os.PathLike[str]) -> Path | None:
    """Where the ready table of the registry at ``home`` lives; None for an object-store registry."""
    text = os.fspath(home)
    return None if "://" in text else Path(text) / READY_FILE


def vectors_path(home: str | os.PathLike[str]) -> Path | None:
    """Where the ready table's vectors live (``VECTORS_FILE``); None for an object-store registry."""
    path = ready_path(home)
    return None if path is None else path.with_name(VECTORS_FILE)


@dataclass(frozen=True)
class ReadyTool:
    """One tool of the table: its id, the name sessions see, its ``find_tools`` entry, its summary (an
    ``also_found`` line) and the text searched for it."""

    id: str
    name: str
    entry: dict[str, Any]
    summary: str
    text: str
    listed: dict[str, Any] = field(default_factory=dict)
    """What ``tools/list`` shows of it beyond the entry, as on the wire (``title``, ``outputSchema``,
    ``annotations``): a tool published from the table is defined as the registry defines it."""


def write(
    home: str | os.PathLike[str],
    tools: list[ReadyTool],
    search: dict[str, Any] | None = None,
    vectors: bytes | None = None,
) -> bool:
    """Leave ``tools`` as the ready table of ``home``'s registry, with ``search`` (``SEARCH_KEY``) and the
    ``vectors`` file it names; False when nothing changed (each file is rewritten only then, atomically,
    the vectors first) or there is no place for it."""
    path = ready_path(home)
    if path is None or not path.parent.is_dir():
        return False
    rows = [
        {"id": t.id, "name": t.name, "entry": t.entry, "summary": t.summary, "text": t.text}
        | ({"listed": t.listed} if t.listed else {})
        for t in tools
    ]
    table: dict[str, Any] = {"format": FORMAT, "tools": rows}
    if search is not None:
        table[SEARCH_KEY] = search
    data = json.dumps(table, ensure_ascii=False, separators=(",", ":")).encode()
    if vectors is not None:
        _replace(path.with_name(VECTORS_FILE), vectors)
    return _replace(path, data)


def _replace(path: Path, data: bytes) -> bool:
    """``path`` holds ``data`` from now on (atomically); False when it did already."""
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return False
    fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


class ReadyIndex:
    """BM25 over a ready table (see the module docstring)."""

    def __init__(self, tools: list[ReadyTool], search: dict[str, Any] | None = None) -> None:
        self.tools = tools
        self.search_data = search
        """What the gateway's own first pass needs beyond the texts (``SEARCH_KEY``), if the table has it."""
        self.ranker: Callable[[str, int], tuple[dict[str, Any], list[str]]] | None = None
        """Answers as the gateway ranks, once a thread has loaded the query encoder
        (``server/turns/ready_rank.py``); None: BM25."""
        self._positions: dict[str, int] | None = None
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []
        for n, tool in enumerate(tools):
            counts = Counter(terms(tool.text))
            self._lengths.append(sum(counts.values()))
            for term, count in counts.items():
                self._postings.setdefault(term, []).append((n, count))
        self._mean = (sum(self._lengths) / len(self._lengths)) if self._lengths else 1.0

    def __len__(self) -> int:
        return len(self.tools)

    def position(self, tool_id: str) -> int:
        """Where ``tool_id`` is in the table: the order in which the gateway lists published tools."""
        if self._positions is None:
            self._positions = {t.id: n for n, t in enumerate(self.tools)}
        return self._positions.get(tool_id, len(self.tools))

    def listed(self, tool_id: str) -> dict[str, Any]:
        """What ``tools/list`` shows of ``tool_id`` beyond its ``find_tools`` entry (``ReadyTool.listed``)."""
        n = self.position(tool_id)
        return self.tools[n].listed if n < len(self.tools) else {}

    def search(self, query: str, k: int) -> list[tuple[ReadyTool, float]]:
        """The best ``k`` tools for ``query``, best first, with their BM25 scores (none below zero)."""
        scores: dict[int, float] = {}
        total = len(self.tools)
        for term in set(terms(query)):
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (total - len(postings) + 0.5) / (len(postings) + 0.5))
            for n, count in postings:
                norm = count + _K1 * (1 - _B + _B * self._lengths[n] / self._mean)
                scores[n] = scores.get(n, 0.0) + idf * count * (_K1 + 1) / norm
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [(self.tools[n], score) for n, score in best if score > 0]

    def answer(self, query: str, k: int) -> tuple[dict[str, Any], list[str]]:
        """The ``find_tools`` document for ``query`` (compact form) and the ids it offers in ``tools``
        (those to publish): the ``ranker``'s once there is one, else BM25's."""
        ranker = self.ranker
        if ranker is not None:
            try:
                return ranker(query, k)
            except Exception:  # never worse off than without vectors
                log.warning("the ready table's vector ranking failed; answering by BM25", exc_info=True)
        return self.bm25_answer(query, k)

    def bm25_answer(self, query: str, k: int) -> tuple[dict[str, Any], list[str]]:
        """``answer`` by BM25 alone."""
        hits = self.search(query, k)
        top = hits[0][1] if hits else 0.0
        share = 0.0 if len(self.tools) < SMALL_FLEET else PUBLISH_SHARE
        chosen = [t for t, s in hits if s >= top * share][:MAX_PUBLISHED]
        return answer_document(chosen, [t for t, _ in hits if t not in chosen]), [t.id for t in chosen]


def answer_document(chosen: list[ReadyTool], others: list[ReadyTool]) -> dict[str, Any]:
    """A compact ``find_tools`` document (``meta_tools.find_tools_result``'s shape): ``tools`` are
    published by the gateway as it takes the request over, so the client hears ``list_changed``."""
    doc: dict[str, Any] = {"tools": [dict(t.entry) for t in chosen]}
    if others:
        doc["also_found"] = {t.name: t.summary for t in others}
    doc["tool_list_changed"] = False
    if not chosen:
        doc["note"] = "no tool matched; rephrase the task, or some upstreams may be disconnected"
    return doc


ANY_SHIPPED_MODEL = "*"
"""``rank_in_background``'s model when the settings chose none: the gateway serves a registry with the
shipped model it was built with (``Registry.open``), the one its table was written with."""


def configured_model(settings: Settings) -> str:
    """The embedding model a gateway with ``settings`` serves with, as far as its table needs to know:
    the chosen one, else whichever shipped model its registry was built with (``ANY_SHIPPED_MODEL``)."""
    return settings.embedding_model if "embedding_model" in settings.model_fields_set else ANY_SHIPPED_MODEL


@dataclass
class Ranking:
    """The background ranking of one registry's ready table (``rank_in_background``)."""

    home: str
    confirmed: threading.Event
    """Set once the settings named the configured model (``model``) and ``params``."""
    model: str | None = None
    params: object = None
    learned: tuple[float, bool] | None = None
    """The settings' ``usage_weight`` and ``fleet_map``: what of the fleet's learning the table may use."""


_rankings: dict[str, Ranking] = {}


def rank_in_background(
    home: str | os.PathLike[str],
    model: str | None = None,
    params: object = None,
    learned: tuple[float, bool] | None = None,
) -> threading.Thread | None:
    """Give ``home``'s ready table its vector ranking from a thread (``ready_rank.run``), once per
    registry in this process; the thread it started, or None (started already, or no table).

    ``model`` (``configured_model``), ``params`` (the ``RetrievalSettings``) and ``learned`` (their
    ``usage_weight`` and ``fleet_map``) come with the settings. Called before they are loaded
    (``toolweave.__main__``, with the registry of the command line), the thread prepares the encoder of
    the model the table was written with, and the table ranks with it once a later call names that model.
    The thread imports the encoder's modules itself: nothing heavy on the caller's path, and the numpy and
    onnxruntime imports are the gateway's own anyway."""
    path = ready_path(home)
    if path is None:
        return None
    key = os.path.realpath(path)
    with _loaded_lock:
        ranking = _rankings.get(key)
        start = ranking is None
        if ranking is None:
            if not path.exists():
                return None
            ranking = _rankings[key] = Ranking(os.fspath(home), threading.Event())
        if model is not None and not ranking.confirmed.is_set():
            ranking.model, ranking.params, ranking.learned = model, params, learned
            ranking.confirmed.set()
    if not start:
        return None

    def run() -> None:
        log.debug("ready table: ranking with vectors from now on, in the background")
        try:
            from toolweave.server.turns import ready_rank

            ready_rank.run(ranking)
        except Exception:  # the table keeps answering by BM25
            log.warning("the ready table could not rank with vectors; BM25 it is", exc_info=True)

    thread = threading.Thread(target=run, name="toolweave-ready-rank", daemon=True)
    thread.start()
    return thread


def plain_find_query(params: object) -> tuple[str, int | None] | None:
    """The query (stripped, not blank) and ``k`` of a plain ``find_tools`` call's params; None for any
    other call, or a ``find_tools`` with more to it (``detail``, a bad argument): the gateway's."""
    if not isinstance(params, dict) or params.get("name") != "find_tools":
        return None
    arguments = params.get("arguments")
    if not isinstance(arguments, dict) or not arguments.keys() <= {"query", "k"}:
        return None
    query, k = arguments.get("query"), arguments.get("k")
    if type(query) is not str or not query.strip() or len(query) > MAX_QUERY_CHARS:
        return None
    if type(k) is str:  # "3": read as the gateway reads a loosely written integer (coerce.py)
        k = integer_text(k)
        if k is None:
            return None
    if k is not None and not (type(k) is int and 1 <= k <= MAX_K):
        return None
    return query.strip(), k


def call_result(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as a ``tools/call`` result on the wire (text and structured content, as the gateway's)."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return {"content": [{"type": "text", "text": text}], "structuredContent": doc, "isError": False}


_loaded: dict[str, tuple[tuple[int, int], ReadyIndex]] = {}
_loaded_lock = threading.Lock()


def load(home: str | os.PathLike[str]) -> ReadyIndex | None:
    """The ready table of ``home``'s registry, indexed; None when there is none (a first start, an
    object store) or it cannot be read (the gateway then answers as it did without one). While the
    file is unchanged, every caller in the process gets the same index: the fronts, the gateway and the
    thread that gives it its ``ranker``."""
    path = ready_path(home)
    if path is None:
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    key, where = (stat.st_mtime_ns, stat.st_size), os.path.realpath(path)
    with _loaded_lock:
        known = _loaded.get(where)
        if known is not None and known[0] == key:
            return known[1]
        index = _read(path)
        if index is not None:
            _loaded[where] = (key, index)
        return index


def drop_ranker(home: str | os.PathLike[str]) -> None:
    """``home``'s table answers by BM25 again, and its query encoder's memory can go: the gateway's own
    search answers from now on."""
    path = ready_path(home)
    with _loaded_lock:
        known = _loaded.get(os.path.realpath(path)) if path is not None else None
        if known is not None:
            known[1].ranker = None


def _read(path: Path) -> ReadyIndex | None:
    try:
        data = json.loads(path.read_bytes())
        if data.get("format") != FORMAT:
            return None
        tools = [
            ReadyTool(
                r["id"],
                r["name"],
                dict(r["entry"]),
                str(r["summary"]),
                str(r["text"]),
                dict(r.get("listed") or {}),
            )
            for r in data["tools"]
        ]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("could not read %s (the first answers wait for the registry): %s", path, exc)
        return None
    search = data.get(SEARCH_KEY)
    return ReadyIndex(tools, search if isinstance(search, dict) else None)
