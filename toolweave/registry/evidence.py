"""Evidence from traffic: what the gateway saw flow between tool calls, and how sure an edge is.

The gateway's traffic observer (``toolweave.server.calls.traffic``) reports **sightings**: in one session, an
argument of a call of ``consumer`` held a value that an earlier result of ``producer`` held
(``consumer.parameter ← producer``, a value-flow sighting), or ``consumer`` was called right after
``producer`` in the same turn with nothing flowing between them (a sequence sighting, ``parameter``
empty: a prerequisite through state, like pressing the brake before starting an engine). Values never
leave the observer: a sighting names tools, a parameter, the producer's field path, how specific the
value was (``0``-``1``) and a keyed hash of the session. Every call also reports a **call** sighting
(``producer`` empty) once per session, so that a tool's sessions can be counted.

``Evidence`` sums the sightings of one ``(consumer, parameter, producer)``: how many, in how many
distinct sessions (``Sketch``, a bounded set that merges by union, so replicas' batches add up
without counting a session twice), how many of them right after the producer (the next-step
evidence), their mean specificity, first and last seen.

**Confidence** (``confidence``): ``weight × (1 − SESSION_DECAY ** (sessions − 1))``. One session is
never an edge (0, whatever it saw), each further independent session closes a share of the remaining
doubt, and the weight caps what any number of sessions can prove. For value flow the weight is the
values' mean specificity (a short word or a two-digit number proves little). Sequence evidence has no
value: its weight is how regularly the pair occurs, the share of the consumer's sessions in which it
came right after the producer (``cd`` follows ``mv`` now and then; ``startEngine`` follows
``pressBrakePedal`` every time). The next-step confidence counts adjacent sessions only, and for a
sequence weighs the share of the *producer's* sessions that went on to the consumer.
The constants were chosen on the learning half of the BFCL multi-turn replay (bench/RESULTS.md).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "SESSION_DECAY",
    "SKETCH_SIZE",
    "Evidence",
    "EvidenceKey",
    "Sighting",
    "Sketch",
    "abstract_path",
    "confidence",
    "field_name",
    "merge_sightings",
    "session_hash",
]

SESSION_DECAY = 0.5
"""Doubt left after each session beyond the first: two sessions reach half the weight (the walk's bar
for a fully specific value), three 0.75, four 0.875. Chosen on the BFCL learning half
(``bench/traffic_calibration.py``): the best worst-fold recall among the constants whose precision
stays >= 0.8 in both folds."""

SKETCH_SIZE = 32
"""Session hashes kept per evidence row (the smallest ones): exact counts up to this, an estimate
beyond, where confidence has long stopped growing."""

_HASH_SPACE = 1 << 63

_FIELD_NAME = re.compile(r"(?!.*\d{3})[A-Za-z_][A-Za-z0-9_]{0,39}")
"""What a field name looks like: an identifier (``account_id``, ``userName``, ``v2``) with no run of
three digits (``USR005``, ``order12446`` are values used as keys) and not longer than 40 characters
(hashes, tokens)."""
ANY_KEY = "*"
"""What a key that is a value becomes in a field path: ``accounts.*.account_id``."""


def field_name(key: str) -> str:
    """``key`` if it looks like a field name, else ``*``: results keyed by values (``{"acct-5521":
    {...}}``, emails, ids, dates) must not put those values into what the registry stores."""
    return key if _FIELD_NAME.fullmatch(key) else ANY_KEY


def abstract_path(path: str) -> str:
    """A dotted field path (``accounts.acct-5521.ids[]``) with every key that is a value abstracted
    (``accounts.*.ids[]``). Paths are built with keys checked already (``toolweave.server.calls.traffic``);
    this is the last check before a path is stored, and cleans rows written before it existed."""
    if not path:
        return path
    out = []
    for segment in path.split("."):
        name = segment.rstrip("[]")
        out.append(field_name(name) + segment[len(name) :] if name else segment)
    return ".".join(out)


EvidenceKey = tuple[str, str, str]
"""``(consumer, parameter, producer)``: parameter ``""`` for sequence evidence, producer ``""`` for the
consumer's own call count."""


@dataclass(frozen=True, slots=True)
class Sighting:
    """One thing the observer saw (see the module docstring). No value, no session key."""

    consumer: str
    parameter: str
    producer: str
    field: str
    specificity: float
    session: int
    """A keyed 63-bit hash of the session (``toolweave.server.calls.traffic``)."""
    adjacent: bool
    """``consumer`` was called right after ``producer``, in the same turn."""
    at_ns: int

    @property
    def key(self) -> EvidenceKey:
        return (self.consumer, self.parameter, self.producer)


@dataclass(frozen=True, slots=True)
class Sketch:
    """A bottom-k set of session hashes: the ``SKETCH_SIZE`` smallest seen. The union of two sketches
    is the sketch of the union, so replicas' counts merge exactly as long as they are small."""

    hashes: tuple[int, ...] = ()

    def add(self, values: Iterable[int]) -> Sketch:
        kept = list(self.hashes)
        for value in values:
            at = bisect.bisect_left(kept, value)
            if at < len(kept) and kept[at] == value:
                continue
            if len(kept) >= SKETCH_SIZE and at >= SKETCH_SIZE:
                continue
            kept.insert(at, value)
            del kept[SKETCH_SIZE:]
        return Sketch(tuple(kept))

    def union(self, other: Sketch) -> Sketch:
        return self.add(other.hashes)

    def count(self) -> int:
        """Distinct sessions: exact below ``SKETCH_SIZE``, the bottom-k estimate from there."""
        if len(self.hashes) < SKETCH_SIZE:
            return len(self.hashes)
        return max(SKETCH_SIZE, round((SKETCH_SIZE - 1) * _HASH_SPACE / (self.hashes[-1] + 1)))


def confidence(sessions: int, weight: float) -> float:
    """How sure ``sessions`` independent sessions of ``weight`` (specificity or regularity, 0-1) make an
    edge (module docstring)."""
    if sessions < 2 or weight <= 0:
        return 0.0
    return round(min(1.0, weight) * (1.0 - SESSION_DECAY ** (sessions - 1)), 3)


@dataclass
class Evidence:
    """Everything sighted for one ``(consumer, parameter, producer)``."""

    consumer: str
    parameter: str
    producer: str
    field: str = ""
    """The producer's result field the value came from (the latest sighting's)."""
    sightings: int = 0
    sessions: Sketch = dataclasses.field(default_factory=Sketch)
    adjacent: Sketch = dataclasses.field(default_factory=Sketch)
    """Sessions in which the consumer came right after the producer, in the same turn."""
    specificity_sum: float = 0.0
    first_ns: int = 0
    last_ns: int = 0

    @property
    def key(self) -> EvidenceKey:
        return (self.consumer, self.parameter, self.producer)

    @property
    def is_sequence(self) -> bool:
        return not self.parameter and bool(self.producer)

    @property
    def is_call_count(self) -> bool:
        return not self.producer

    @property
    def specificity(self) -> float:
        """The values' mean specificity (0 for sequence evidence: no value)."""
        return self.specificity_sum / self.sightings if self.sightings else 0.0

    def edge_confidence(self, consumer_sessions: int) -> float:
        """How sure the edge ``consumer ← producer`` is; ``consumer_sessions``: the sessions the consumer
        was called in (module docstring)."""
        if self.is_sequence:
            adjacent = self.adjacent.count()
            return confidence(adjacent, adjacent / max(1, consumer_sessions))
        return confidence(self.sessions.count(), self.specificity)

    def next_step_confidence(self, producer_sessions: int) -> float:
        """How sure "after ``producer``, ``consumer`` comes next" is: adjacent sessions only."""
        adjacent = self.adjacent.count()
        if self.is_sequence:
            return confidence(adjacent, adjacent / max(1, producer_sessions))
        return confidence(adjacent, self.specificity)

    def add(self, sighting: Sighting) -> None:
        self.sightings += 1
        self.sessions = self.sessions.add((sighting.session,))
        if sighting.adjacent:
            self.adjacent = self.adjacent.add((sighting.session,))
        self.specificity_sum += sighting.specificity
        if sighting.field and sighting.at_ns >= self.last_ns:
            self.field = sighting.field
        self.first_ns = sighting.at_ns if not self.first_ns else min(self.first_ns, sighting.at_ns)
        self.last_ns = max(self.last_ns, sighting.at_ns)


def merge_sightings(rows: dict[EvidenceKey, Evidence], sightings: Sequence[Sighting]) -> set[EvidenceKey]:
    """Add ``sightings`` to ``rows`` (in place, new rows created); returns the keys touched."""
    touched: set[EvidenceKey] = set()
    for s in sightings:
        row = rows.get(s.key)
        if row is None:
            row = rows[s.key] = Evidence(s.consumer, s.parameter, s.producer)
        row.add(s)
        touched.add(s.key)
    return touched


def session_hash(digest: bytes) -> int:
    """A 63-bit session hash from a keyed digest (the sketch's hash space)."""
    return int.from_bytes(digest[:8], "big") >> 1
