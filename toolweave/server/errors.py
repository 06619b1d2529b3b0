"""One error payload for every failed tool call the gateway answers.

The builder lives at the package root (``toolweave/call_errors.py``) because backends build these
results too; this module keeps the server's name for it. See that module for the shape.
"""

from __future__ import annotations

from toolweave.call_errors import ErrorCode, error_code_of
from toolweave.call_errors import tool_error_result as to_tool_error_result

__all__ = ["ErrorCode", "error_code_of", "to_tool_error_result"]
