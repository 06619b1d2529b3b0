"""The gold graph read from backend code: guards on state, id arguments and the methods that give them.

Synthetic backend classes written here exercise each part of the analysis; the BFCL multi-turn test
reads the real backends and skips without ../shared/datasets.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from toolweave.benchmark.code_graph import analyse_source

SHOP = textwrap.dedent(
    """
    MIN_STOCK = 1

    class Shop:
        def _load_scenario(self, scenario):
            self.user = None
            self.orders = {}
            self.counter = 0
            self.doors_open = 2
            self.gear = "park"
            self.stock = 0

        def login(self, name, password):
            if not name:
                return {"error": "no name"}
            self.user = name
            return {"ok": True}

        def logout(self):
            self.user = None
            return {"ok": True}

        def whoami(self):
            return {"user": self.user}

        def place_order(self, item, price):
            if not self.user:
                return {"error": "log in first"}
            if price <= 0:
                return {"error": "bad price"}
            order_id = self._next_id()
            self.orders[order_id] = {"item": item, "status": "open"}
            return {"order_id": order_id}

        def _next_id(self):
            self.counter += 1
            return self.counter

        def order_history(self):
            return {"orders": list(self.orders.keys())}

        def order_count(self):
            return {"count": len(self.orders)}

        def order_status(self, order_id):
            if order_id not in self.orders:
                return {"error": "no such order"}
            return {"status": self.orders[order_id]["status"]}

        def cancel_order(self, order_id):
            order = self._find(order_id)
            if not order:
                return {"cancelled": False}
            order["status"] = "cancelled"
            return {"cancelled": True}

        def _find(self, order_id):
            for key, order in self.orders.items():
                if key == order_id:
                    return order
            return None

        def annotate(self, order_id, note):
            if order_id not in self.orders:
                return {"error": "no such order"}
            self.notes[order_id] = note
            return {"ok": True}

        def all_notes(self):
            return {"notes": self.notes}

        def rename(self, item_name):
            if item_name not in self.orders:
                return {"error": "unknown"}
            return {"ok": True}

        def close_doors(self):
            self.doors_open = 0
            return {"doors_open": self.doors_open}

        def open_doors(self):
            self.doors_open = 2
            return {"doors_open": self.doors_open}

        def shift(self, gear):
            self.gear = gear
            return {"gear": gear}

        def drive(self):
            if self.doors_open > 0:
                return {"error": "close the doors"}
            if self.gear == "park":
                return {"error": "shift out of park"}
            return {"driving": True}

        def restock(self, amount):
            self.stock += amount
            return {"stock": self.stock}

        def sell(self):
            if self.stock < MIN_STOCK:
                return {"error": "out of stock"}
            return {"sold": True}
    """
)


def _edges() -> dict[tuple[str, str, str | None], str]:
    return {(e.tool, e.depends_on, e.parameter): e.reason for e in analyse_source(SHOP)["Shop"]}


def test_a_state_guard_depends_on_the_setters_that_can_satisfy_it() -> None:
    edges = _edges()
    assert ("place_order", "login", None) in edges
    assert "not self.user" in edges[("place_order", "login", None)]
    assert ("place_order", "logout", None) not in edges  # it only ever assigns None: no way in
    assert ("place_order", "whoami", None) not in edges  # reads the state, sets nothing
    assert ("drive", "close_doors", None) in edges
    assert ("drive", "open_doors", None) not in edges  # 2 doors open still refuses
    assert ("drive", "shift", None) in edges  # assigns an argument: may satisfy the guard
    assert ("sell", "restock", None) in edges  # a module constant and an augmented assignment


def test_an_id_argument_depends_on_the_methods_whose_result_carries_it() -> None:
    edges = _edges()
    # stored through a private helper's id, returned; and a listing of the keys
    assert ("order_status", "place_order", "order_id") in edges
    assert ("order_status", "order_history", "order_id") in edges
    # a refusal reported as a false status, through a helper that looks the id up
    assert ("cancel_order", "place_order", "order_id") in edges
    assert ("order_status", "order_count", "order_id") not in edges  # a count carries no id
    assert ("cancel_order", "order_status", "order_id") not in edges  # it needs the id itself
    # an argument stored under a key is still the caller's value: the notes do not carry order ids
    assert ("annotate", "place_order", "order_id") in edges
    assert ("annotate", "all_notes", "order_id") not in edges
    # an argument a user can type (a name) gives no edge, nor does a range check on an amount
    assert not any(t == "rename" for t, _, _ in edges)
    assert not any(p == "price" for _, _, p in edges)


def test_keys_and_values_are_told_apart() -> None:
    source = textwrap.dedent(
        """
        class Users:
            def _load_scenario(self, s):
                self.users = {"alice": "U1"}
            def names(self):
                return {"names": list(self.users.keys())}
            def user_id(self, name):
                return {"user_id": self.users.get(name)}
            def message(self, user_id):
                if user_id not in self.users.values():
                    return {"error": "unknown user"}
                return {"ok": True}
        """
    )
    found = {(e.tool, e.depends_on) for e in analyse_source(source)["Users"]}
    assert found == {("message", "user_id")}


def test_the_bfcl_backends_give_their_logins_ids_and_vehicle_prerequisites(
    dataset_dir: Callable[[str], Path],
) -> None:
    from toolweave.benchmark.gold_graphs import gold_graph

    dataset_dir("bfcl_multi_turn")
    tools, gold = gold_graph("bfcl_multi_turn")
    pairs = {(e.tool.split("__")[1], e.depends_on.split("__")[1], e.parameter_name) for e in gold}
    assert {
        ("send_message", "message_login", None),
        ("post_tweet", "authenticate_twitter", None),
        ("place_order", "trading_login", None),
        ("book_flight", "authenticate_travel", "access_token"),
        ("retrieve_invoice", "book_flight", "booking_id"),
        ("retrieve_invoice", "get_booking_history", "booking_id"),  # a deep copy of the records
        ("get_order_details", "place_order", "order_id"),
        ("startEngine", "pressBrakePedal", None),
        ("startEngine", "lockDoors", None),
        ("setCruiseControl", "startEngine", None),
    } <= pairs
    assert ("startEngine", "releaseBrakePedal", None) not in pairs
    assert ("send_message", "list_users", "receiver_id") not in pairs  # names, not ids
    assert ("create_ticket", "logout", None) not in pairs
    assert all(e.reason for e in gold) and len(tools) == 162


def test_a_folder_without_backend_code_is_a_clear_error(tmp_path: Path) -> None:
    from toolweave.benchmark.gold_graphs import code_gold_edges
    from toolweave.errors import CatalogError

    with pytest.raises(CatalogError, match="no executable/ folder"):
        code_gold_edges(tmp_path, [])


def test_backend_methods_map_to_the_tools_documenting_them(tmp_path: Path) -> None:
    from toolweave.benchmark.gold_graphs import code_gold_edges
    from toolweave.records import EdgeKind, ToolRecord

    (tmp_path / "executable").mkdir()
    (tmp_path / "executable" / "shop.py").write_text(SHOP, encoding="utf-8")
    rows = [("login", "login"), ("shop_place_order", "place_order"), ("order_status", "order_status")]
    (tmp_path / "tools.jsonl").write_text(
        "\n".join(json.dumps({"name": n, "function_name": f, "class": "Shop"}) for n, f in rows),
        encoding="utf-8",
    )
    tools = [ToolRecord(id=f"s__{n}", source="s", name=n) for n, _ in rows]
    edges = {(e.tool, e.depends_on, e.kind, e.parameter_name) for e in code_gold_edges(tmp_path, tools)}
    assert edges == {  # methods no tool documents (order_history, logout, ...) are left out
        ("s__shop_place_order", "s__login", EdgeKind.TOOL_DIRECTLY_DEPENDS_ON, None),
        ("s__order_status", "s__shop_place_order", EdgeKind.PARAMETER_DIRECTLY_DEPENDS_ON, "order_id"),
    }
