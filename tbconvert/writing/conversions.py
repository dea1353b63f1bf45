"""The ``conversions`` table: each conversion's start, with its options, and its end, with its
summary, written in the writer's open transaction."""

from __future__ import annotations

import time

from tbconvert.writing.statements import Statements

__all__ = ["finish_conversion", "start_conversion"]


def start_conversion(statements: Statements, logdir: str, tool_version: str, options: str) -> int:
    """Record the start of a conversion; returns its id."""
    return int(
        statements.scalar(
            "INSERT INTO conversions (logdir, tool_version, started_at, status, options) "
            "VALUES (:logdir, :version, :now, 'running', :options) RETURNING id",
            {"logdir": logdir, "version": tool_version, "now": time.time(), "options": options},
        )
    )


def finish_conversion(statements: Statements, conversion_id: int, summary: str) -> None:
    """Record the end of a conversion and its summary."""
    statements.run(
        "UPDATE conversions SET finished_at = :now, status = 'finished', "
        "summary = :summary WHERE id = :id",
        {"id": conversion_id, "now": time.time(), "summary": summary},
    )
