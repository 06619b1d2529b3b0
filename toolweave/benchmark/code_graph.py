"""A gold dependency graph read from the code of stateful API backends (static analysis with ``ast``).

A public method of a backend class that *refuses* (returns a dict with an ``"error"`` key, or raises)
unless some state holds depends on what establishes that state:

* **state guard** → tool edge. The refusal test reads one attribute of ``self`` and compares it with a
  constant (``not self.current_user``, ``self.token_expires_in == 0``, ``self.brakePedalStatus !=
  "pressed"``, ``self.fuelLevel < MIN_FUEL_LEVEL``) and no argument. The method depends on every other
  public method that assigns that attribute, unless all it assigns are constants under which the
  method still refuses (``logout`` sets ``current_user = None``: not a way in).
* **argument guard** → parameter edge. The refusal test checks an identifier argument (``*_id``, ``id``,
  ``*token*``) against an attribute (``order_id not in self.orders``, ``access_token !=
  self.access_token``, ``not self._find_ticket(ticket_id)``). The argument depends on every other public
  method whose *result* carries entries of that attribute (``place_order`` stores an order and returns its
  id; ``get_order_history`` returns the orders), unless that method itself needs such an argument (it
  consumes the ids rather than gives them) or returns the dict's keys where the guard wants its values.

Guards on arguments a user can type (names, file names, amounts, ranges) give no edge: only another
call's result can give an id or a token. Refusals in an ``else`` branch are not read (in these backends
they test arguments only). Every edge carries its reason: the test and the assignment or result.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CodeEdge", "MethodFacts", "analyse_class", "analyse_source", "code_edges"]

_ID_ARGUMENT = re.compile(r"(^|_)(id|ids|token)$|token", re.IGNORECASE)
"""Arguments only another call's result can give: identifiers and tokens."""
_MUTATORS = frozenset(
    {
        "append",
        "add",
        "update",
        "pop",
        "remove",
        "extend",
        "insert",
        "clear",
        "setdefault",
        "discard",
        "popitem",
    }
)
_UNSET = object()


@dataclass(frozen=True)
class CodeEdge:
    """``tool`` (a method) depends on ``depends_on``; ``parameter`` is set for an argument guard."""

    tool: str
    depends_on: str
    parameter: str | None
    reason: str


@dataclass
class MethodFacts:
    """What one method does with the object's state (flow-insensitive, per method)."""

    name: str
    params: list[str]
    writes: dict[str, list[object]] = field(default_factory=dict)
    """attribute → constants assigned to it (``_UNSET`` for any non-constant write)."""
    state_guards: list[tuple[StateTest, ast.expr]] = field(default_factory=list)
    """(test, refusal test as written) for guards on state alone."""
    argument_guards: list[tuple[str, str, str, ast.expr]] = field(default_factory=list)
    """(argument, attribute, facet ``keys`` / ``values`` / ``any``, refusal test)."""
    returns: dict[str, str] = field(default_factory=dict)
    """attribute whose entries the result carries → facet."""
    calls: set[str] = field(default_factory=set)
    """methods of ``self`` it calls."""


def _self_attr(node: ast.AST) -> str | None:
    """``self.x`` → ``x``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _root_attr(node: ast.AST) -> str | None:
    """The attribute of ``self`` an lvalue lands in: ``self.x``, ``self.x[k]``, ``self.x[k]["f"]``."""
    while isinstance(node, ast.Subscript | ast.Attribute):
        if (attr := _self_attr(node)) is not None:
            return attr
        node = node.value
    return None


def _refuses(body: list[ast.stmt]) -> bool:
    """A branch that returns an error dict (or a list holding one), a status that is false, or raises."""
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.Return):
            value = stmt.value
            if isinstance(value, ast.List) and value.elts:
                value = value.elts[0]
            if isinstance(value, ast.Dict) and (
                any(isinstance(k, ast.Constant) and k.value == "error" for k in value.keys)
                or any(isinstance(v, ast.Constant) and v.value is False for v in value.values)
            ):
                return True  # an error, or a status reported false ("login_status": False)
    return False


class _Flow:
    """Which attributes' entries and which arguments a local name or an expression carries."""

    def __init__(self, params: list[str], helper_returns: Mapping[str, Mapping[str, str]]) -> None:
        self.params = set(params)
        self.helpers = helper_returns
        self.local_attrs: dict[str, dict[str, str]] = {}
        self.local_args: dict[str, set[str]] = {}

    def args(self, node: ast.AST) -> set[str]:
        found: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                if n.id in self.params:
                    found.add(n.id)
                found |= self.local_args.get(n.id, set())
        return found

    def entries(self, node: ast.AST | None) -> dict[str, str]:
        """attribute → facet whose entries ``node``'s value holds (``len`` of it: none)."""
        if node is None:
            return {}
        if (attr := _self_attr(node)) is not None:
            return {attr: "any"}
        if isinstance(node, ast.Name):
            return dict(self.local_attrs.get(node.id, {}))
        if isinstance(node, ast.Subscript):
            if (attr := _self_attr(node.value)) is not None:
                return {attr: "values"}
            return self.entries(node.value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                if (attr := _self_attr(func.value)) is not None:
                    facet = {"keys": "keys", "values": "values", "get": "values"}.get(func.attr, "any")
                    return {attr: facet}
                if (helper := _self_attr(func)) is not None:
                    return dict(self.helpers.get(helper, {}))
                return self.entries(func.value)  # e.g. ``x.copy()``, ``", ".join(x)``
            if isinstance(func, ast.Name) and func.id in (
                "list",
                "dict",
                "sorted",
                "deepcopy",
                "copy",
                "set",
            ):
                return self._union(node.args)
            return {}
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            carried = self._union(g.iter for g in node.generators)
            return carried
        if isinstance(node, ast.Dict):
            return self._union(v for v in node.values)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return self._union(node.elts)
        if isinstance(node, ast.IfExp):
            return self._union([node.body, node.orelse])
        return {}

    def _union(self, nodes: Iterable[ast.AST]) -> dict[str, str]:
        out: dict[str, str] = {}
        for n in nodes:
            for attr, facet in self.entries(n).items():
                out[attr] = facet if out.get(attr, facet) == facet else "any"
        return out

    def bind(self, target: ast.AST, attrs: Mapping[str, str], args: set[str]) -> None:
        """A local name (or a tuple of them) now holds these entries and arguments. Attributes and
        subscripts are not locals, and an argument keeps the caller's value whatever it is stored in."""
        if isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self.bind(elt, attrs, args)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, attrs, args)
        elif isinstance(target, ast.Name) and target.id not in self.params and target.id != "self":
            self.local_attrs.setdefault(target.id, {}).update(attrs)
            self.local_args.setdefault(target.id, set()).update(args)


def _constant(node: ast.AST, consts: Mapping[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _constant(node.operand, consts)
        return -inner if isinstance(inner, int | float) else _UNSET
    return _UNSET


_COMPARE: Mapping[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


@dataclass(frozen=True)
class StateTest:
    """A refusal test on one attribute: ``[not] self.attr [op constant]``."""

    attr: str
    negated: bool
    op: type[ast.cmpop] | None
    constant: object

    def refuses(self, value: object) -> bool:
        """Whether the method still refuses with the attribute set to ``value`` (undecidable → no)."""
        try:
            held = bool(value) if self.op is None else bool(_COMPARE[self.op](value, self.constant))
        except TypeError:
            return False
        return held != self.negated


def _state_test(test: ast.expr, consts: Mapping[str, object]) -> StateTest | None:
    """A refusal test on one attribute against a constant or its truth, or None."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    node = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    if (attr := _self_attr(node)) is not None:
        return StateTest(attr, negated, None, None)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        const = _constant(node.comparators[0], consts)
        if (attr := _self_attr(node.left)) is not None and const is not _UNSET:
            return StateTest(attr, negated, type(node.ops[0]), const)
    return None


def _method_facts(
    fn: ast.FunctionDef, consts: Mapping[str, object], helper_returns: Mapping[str, Mapping[str, str]]
) -> MethodFacts:
    params = [a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs]
    facts = MethodFacts(fn.name, params)
    flow = _Flow(params, helper_returns)
    for _ in range(3):  # locals feed locals: a few passes reach the fixed point on methods this size
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    flow.bind(t, flow.entries(node.value), flow.args(node.value))
            elif isinstance(node, ast.For | ast.comprehension):
                flow.bind(node.target, flow.entries(node.iter), flow.args(node.iter))
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if (attr := _root_attr(t)) is None:
                    continue
                plain = _self_attr(t) is not None and not isinstance(node, ast.AugAssign)
                value = _constant(node.value, consts) if plain and node.value is not None else _UNSET
                facts.writes.setdefault(attr, []).append(value)
                if isinstance(t, ast.Subscript) and _self_attr(t.value) == attr:
                    # what goes into a collection is one of its entries: the key and the stored value
                    flow.bind(t.slice, {attr: "keys"}, set())
                    if node.value is not None and isinstance(node.value, ast.Name):
                        flow.bind(node.value, {attr: "values"}, set())
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                if (attr := _root_attr(t)) is not None:
                    facts.writes.setdefault(attr, []).append(_UNSET)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if (attr := _root_attr(node.func.value)) is not None and node.func.attr in _MUTATORS:
                facts.writes.setdefault(attr, []).append(_UNSET)
                for arg in node.args:
                    if isinstance(arg, ast.Name):
                        flow.bind(arg, {attr: "values"}, set())
            elif (method := _self_attr(node.func)) is not None:
                facts.calls.add(method)
    for node in ast.walk(fn):
        if isinstance(node, ast.Return):
            for attr, facet in flow.entries(node.value).items():
                facts.returns[attr] = facet if facts.returns.get(attr, facet) == facet else "any"
        if not (isinstance(node, ast.If) and _refuses(node.body)):
            continue
        test, args = node.test, flow.args(node.test)
        if not args:
            if (found := _state_test(test, consts)) is not None:
                facts.state_guards.append((found, test))
            continue
        ids = sorted(a for a in args if _ID_ARGUMENT.search(a))
        if not ids:
            continue  # an argument a user can type: a name, an amount, a file name
        read = {a for n in ast.walk(test) if (a := _self_attr(n)) is not None} | set(flow.entries(test))
        for n in ast.walk(test):
            if isinstance(n, ast.Name):
                read |= set(flow.local_attrs.get(n.id, {}))
            if isinstance(n, ast.Call) and (helper := _self_attr(n.func)) is not None:
                read |= set(helper_returns.get(helper, {}))
        # ``x in self.d.values()`` (or a list built from them) wants the values, ``x in self.d`` the keys
        facets = flow.entries(test.comparators[0]) if isinstance(test, ast.Compare) else {}
        for attr in sorted(read):
            for name in ids:
                facts.argument_guards.append((name, attr, facets.get(attr, "any"), test))
    return facts


def analyse_class(cls: ast.ClassDef, consts: Mapping[str, object]) -> dict[str, MethodFacts]:
    """Facts of every method of ``cls`` (private helpers too: public ones act through them)."""
    fns = [f for f in cls.body if isinstance(f, ast.FunctionDef)]
    helper_returns: dict[str, dict[str, str]] = {}
    facts: dict[str, MethodFacts] = {}
    for _ in range(2):  # helpers' results first, then the methods that call them
        facts = {f.name: _method_facts(f, consts, helper_returns) for f in fns}
        helper_returns = {name: f.returns for name, f in facts.items()}
    for f in facts.values():  # a method writes what the methods it calls write
        seen, todo = {f.name}, list(f.calls)
        while todo:
            callee = facts.get(todo.pop())
            if callee is None or callee.name in seen:
                continue
            seen.add(callee.name)
            for attr, values in callee.writes.items():
                f.writes.setdefault(attr, []).extend(values)
            todo.extend(callee.calls)
    return facts


def _public(facts: Mapping[str, MethodFacts]) -> Iterator[MethodFacts]:
    return (f for name, f in facts.items() if not name.startswith("_"))


def class_edges(facts: Mapping[str, MethodFacts]) -> list[CodeEdge]:
    """The edges among one class's public methods."""
    edges: dict[tuple[str, str, str | None], CodeEdge] = {}
    for m in _public(facts):
        for guard, test in m.state_guards:
            attr = guard.attr
            for w in _public(facts):
                values = w.writes.get(attr, [])
                if w.name == m.name or not values:
                    continue
                if all(v is not _UNSET and guard.refuses(v) for v in values):
                    continue  # every value it assigns keeps the method refusing: not a way in
                reason = f"{m.name} refuses when `{ast.unparse(test)}`; {w.name} assigns self.{attr}"
                edges.setdefault((m.name, w.name, None), CodeEdge(m.name, w.name, None, reason))
        for arg, attr, facet, test in m.argument_guards:
            for p in _public(facts):
                carried = p.returns.get(attr)
                if p.name == m.name or carried is None:
                    continue
                if any(a == attr for _, a, _, _ in p.argument_guards):
                    continue  # it needs such an id itself: it consumes them
                if "any" not in (facet, carried) and facet != carried:
                    continue  # the guard wants the values, the result gives the keys (or the reverse)
                reason = (
                    f"{m.name} refuses when `{ast.unparse(test)}`; {p.name}'s result carries "
                    f"self.{attr} ({carried})"
                )
                edges.setdefault((m.name, p.name, arg), CodeEdge(m.name, p.name, arg, reason))
    return list(edges.values())


def _module_constants(tree: ast.Module) -> dict[str, object]:
    consts: dict[str, object] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _constant(stmt.value, consts)
            if value is not _UNSET:
                consts[stmt.targets[0].id] = value
    return consts


def analyse_source(source: str) -> dict[str, list[CodeEdge]]:
    """Class name → its edges, for every class defined in ``source``."""
    tree = ast.parse(source)
    consts = _module_constants(tree)
    return {c.name: class_edges(analyse_class(c, consts)) for c in tree.body if isinstance(c, ast.ClassDef)}


def code_edges(folder: Path) -> dict[str, list[CodeEdge]]:
    """Class name → edges, over every ``*.py`` backend module of ``folder``."""
    out: dict[str, list[CodeEdge]] = {}
    for path in sorted(folder.glob("*.py")):
        out.update(analyse_source(path.read_text(encoding="utf-8")))
    return out
