"""Fixtures for the graph-inference tests."""

from __future__ import annotations
