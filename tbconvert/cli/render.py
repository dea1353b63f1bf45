"""Text rendering for the terminal: run listings, the conversion and push summaries (the
table formats themselves are in ``tables``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from tbconvert.cli.tables import escape_markdown, render_markdown, render_rows, render_table

if TYPE_CHECKING:
    from tbconvert.conversion.summary import Summary
    from tbconvert.push.aim import AimPushSummary
    from tbconvert.push.core import RunPushed
    from tbconvert.push.mlflow import PushSummary
    from tbconvert.push.wandb import WandbSummary

_MAX_LISTED = 10
_BLOCKS = "▁▂▃▄▅▆▇█"


def render_runs(runs: Sequence[dict[str, Any]], fmt: str = "table") -> str:
    """The ``tbconvert runs`` listing: one line per run, with its source when there are several;
    ``fmt``: ``table`` or ``md`` (:func:`render_rows`)."""
    if not runs:
        return "no runs in this store"
    several = len({row["source"] for row in runs}) > 1
    troubled = any(row.get("file_problems") for row in runs)
    columns = ("id", "run", *(("source",) if several else ()))
    columns += ("group", "contexts", "series", "points", "params")
    columns += ("files",) if troubled else ()
    asked = list(runs[0].get("values", {}))  # --column NAME=EXPR, in their order
    columns += tuple(asked)
    return render_rows(
        columns,
        [
            (
                row["run_id"],
                row["run_path"],
                *((row["source"],) if several else ()),
                row["group_path"] or "-",
                ",".join(map(_context, row["contexts"])),
                row["series"],
                ", ".join(f"{table} {n}" for table, n in row["points"].items()) or "-",
                _params_line(row["params"]),
                *((_trouble(row.get("file_problems", {})),) if troubled else ()),
                *(row["values"][name] for name in asked),
            )
            for row in runs
        ],
        fmt,
    )


def _trouble(problems: dict[str, int]) -> str:
    """Files of a run that are not whole: ``2 damaged, 1 partial`` (``-`` for none)."""
    return ", ".join(f"{count} {status}" for status, count in sorted(problems.items())) or "-"


def render_run(detail: dict[str, Any], fmt: str = "table") -> str:
    """The ``tbconvert show`` text: the run, its series per plugin, params and files; ``fmt``
    ``md`` gives Markdown (a heading per section, each table a Markdown table)."""
    run = detail["run"]
    markdown = fmt == "md"
    facts = [
        ("run", f"{run['run_path']}  (id {run['run_id']}, name {run['name']})"),
        ("logdir", run["logdir"]),
        ("group", run["group_path"] or "-"),
        ("written", f"{_time(run['first_wall_time'])} .. {_time(run['last_wall_time'])}"),
    ]
    lines = [
        f"- {name}: {escape_markdown(value)}" if markdown else f"{name:<8} {value}"
        for name, value in facts
    ]

    def section(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        table = render_markdown(columns, rows) if markdown else render_table(columns, rows, "  ")
        lines.extend(
            ["", f"### {title}" if markdown else title, *([""] if markdown else []), table]
        )

    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for series in detail["series"]:
        by_plugin.setdefault(series["plugin"], []).append(series)
    for plugin, series_list in sorted(by_plugin.items()):
        trend = plugin == "scalars"
        section(
            f"{plugin} ({len(series_list)} series)",
            ("context", "tag", "points", "steps", "last value") + (("trend",) if trend else ()),
            [
                (
                    _context(s["context"]),
                    s["tag"],
                    s["points"],
                    _steps(s),
                    _value(s.get("last_value", "")),
                )
                + ((sparkline(s.get("trend") or []),) if trend else ())
                for s in series_list
            ],
        )
    sessions = len(detail["params"])
    title = f"params ({sessions} session{'' if sessions == 1 else 's'})"
    lines += ["", f"### {title}" if markdown else title, *([""] if markdown and sessions else [])]
    lines += [
        f"{'-' if markdown else ' '} {_context(context)}: {_params_line({context: values})}"
        for context, values in detail["params"].items()
    ]
    section(
        f"files ({len(detail['files'])})",
        ("path", "context", "bytes", "read to", "records", "damaged", "status"),
        [
            (
                f["path"],
                _context(f["context"]),
                f["size"],
                f["offset_consumed"],
                f["records"],
                f["damaged_records"],
                f["status"] + (f": {f['last_error']}" if f["last_error"] else ""),
            )
            for f in detail["files"]
        ],
    )
    return "\n".join(lines)


def sparkline(values: Sequence[float | None]) -> str:
    """One block character per value, ``▁`` for the lowest and ``█`` for the highest.

    A missing or non-finite value is a space; a flat series is a row of ``▄``.
    """
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return " " * len(values)
    low, high = min(finite), max(finite)
    characters = []
    for value in values:
        if value is None or not math.isfinite(value):
            characters.append(" ")
        elif high == low:
            characters.append(_BLOCKS[3])
        else:
            level = round((value - low) / (high - low) * (len(_BLOCKS) - 1))
            characters.append(_BLOCKS[level])
    return "".join(characters)


def _context(name: str) -> str:
    return name if name else "''"


def _steps(series: dict[str, Any]) -> str:
    if series["first_step"] is None:
        return "-"
    return f"{series['first_step']}..{series['last_step']}"


def _value(value: Any) -> str:
    if value is None:
        return "NaN"  # a NULL scalar is a logged NaN (design §6)
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= 40 else text[:39] + "…"


def _time(wall_time: float | None) -> str:
    if wall_time is None:
        return "-"
    return datetime.fromtimestamp(wall_time, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _params_line(sessions: dict[str, dict[str, Any]]) -> str:
    # One value per key, or every value the sessions gave it, in context order.
    values: dict[str, list[Any]] = {}
    for params in sessions.values():
        for key, value in params.items():
            if value not in values.setdefault(key, []):
                values[key].append(value)
    return (
        " ".join(f"{key}={'|'.join(map(_param, found))}" for key, found in sorted(values.items()))
        or "-"
    )


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def render_summary(summary: Summary) -> str:
    """The human summary of a conversion, printed on stderr."""
    if summary.dry_run:
        return render_plan(summary)
    lines = [
        f"Converted {summary.logdir} into {summary.store} in {summary.elapsed:.2f} s",
        f"  runs:     {summary.runs} ({summary.runs_created} new, "
        f"{summary.runs_extended} extended), {summary.contexts} contexts" + _shard_note(summary),
        f"  series:   {summary.series_created} new, {summary.series_extended} extended",
        f"  points:   {summary.total_points:,}"
        + (
            " (" + ", ".join(f"{k} {v:,}" for k, v in sorted(summary.points.items())) + ")"
            if summary.points
            else ""
        )
        + (f", {summary.rate():,.0f}/s" if summary.total_points else ""),
        f"  files:    {summary.files_total} ({summary.files_read} read, "
        f"{summary.files_unchanged} unchanged, {summary.files_replaced} replaced, "
        f"{summary.files_gone} gone), "
        f"{summary.bytes_read:,} bytes read",
    ]
    for title, counts in (("skipped", summary.skipped), ("undecodable", summary.undecodable)):
        for plugin, tags in sorted(counts.items()):
            names = ", ".join(sorted(tags)[:_MAX_LISTED])
            more = f" and {len(tags) - _MAX_LISTED} more" if len(tags) > _MAX_LISTED else ""
            lines.append(f"  {title}:  {plugin}: {sum(tags.values()):,} values ({names}{more})")
    if summary.filtered_values:
        lines.append(f"  filtered: {summary.filtered_values:,} values by --tag/--exclude-tag")
    if summary.files_partial:
        lines.append(
            f"  partial:  {summary.files_partial} files end inside a record (still "
            "being written?); the rest is read on the next run"
        )
    if summary.orphans:
        count = len(summary.orphans)
        if summary.orphans_skipped:
            what = "skipped (--skip-orphans)"
        else:
            new = len(summary.orphans_new)
            what = "kept as runs of their directories" + (
                f" ({new} new: see warnings)" if new else ""
            )
        lines.append(f"  orphans:  {count} event files in directories that hold runs, {what}")
    if summary.runs_merged:
        runs = "run" if summary.runs_merged == 1 else "runs"
        lines.append(
            f"  merged:   {summary.runs_merged} {runs} of earlier conversions re-classified "
            "into others (their files moved)"
        )
    lines.extend(f"  taken:    {line}" for line in summary.taken_over)
    if summary.lossy_records:
        lines.append(
            f"  repaired: {summary.lossy_records} records with invalid UTF-8 "
            "(kept with backslash escapes)"
        )
    if summary.damaged_records or summary.problems:
        lines.append(f"  damaged:  {summary.damaged_records} records skipped; first problems:")
        lines.extend(f"    {problem}" for problem in summary.problems[:_MAX_LISTED])
    if summary.still_damaged:
        count = len(summary.still_damaged)
        files = "file still holds" if count == 1 else "files still hold"
        lines.append(
            f"  damaged:  {count} {files} damaged or no valid records "
            f"(first: {summary.still_damaged[0]}); 'tbconvert show RUN' says where"
        )
    if summary.schema_change:
        lines.append(f"  store:    {summary.schema_change}")
    return "\n".join(lines)


def _shard_note(summary: Summary) -> str:
    """Which shard ran, and its share of the logdir's runs (``--shard``)."""
    if summary.shard is None:
        return ""
    return f"; shard {summary.shard}: {summary.runs} of the logdir's {summary.runs_in_logdir} runs"


def render_plan(summary: Summary) -> str:
    """What a dry run would read."""
    lines = [f"Dry run: {summary.logdir} -> {summary.store} (nothing written)"]
    for entry in summary.plan:
        # A moved file is read only as it then stands: its new bytes, or whole if replaced.
        then = entry.get("then", "unchanged")
        how = f", {then}" if entry["action"] == "moved" and then != "unchanged" else ""
        lines.append(
            f"  {entry['action']:<9} {entry['run_path']} [{entry['context']}] "
            f"{entry['path']} ({entry['bytes']:,} bytes{how})"
        )
    lines.extend(f"  {line.replace('took', 'would take', 1)}" for line in summary.taken_over)
    lines.append(
        f"  {summary.runs} runs{_shard_note(summary)}, {summary.files_total} files, "
        f"{sum(e['bytes'] for e in summary.plan if e['action'] != 'unchanged'):,} bytes "
        "to read"
    )
    return "\n".join(lines)


def render_push_wandb(summary: WandbSummary) -> str:
    """The human summary of ``tbconvert push wandb`` (stderr)."""
    runs = summary.runs
    created = sum(run.created for run in runs)
    where = f"offline run directories under {summary.offline}" if summary.offline else "W&B"
    project = f"{summary.entity}/{summary.project}" if summary.entity else summary.project
    verb = "would push" if summary.dry_run else "pushed"
    lines = [f"warning: {warning}" for warning in summary.warnings]
    lines.append(
        f"{verb} {len(runs)} run{'s' if len(runs) != 1 else ''} ({created} new) into project "
        f"{project!r} ({where}): {summary.metrics} points, "
        f"{sum(run.params for run in runs)} config entries, "
        f"{sum(run.artifacts for run in runs)} images, texts and histograms"
    )
    if summary.not_sent:
        lines.append(
            f"{summary.not_sent} new points could not go: W&B keeps one point per step and "
            "steps that only grow, so each series went as its last attempt "
            "(v_scalars_current), a step written twice as its last point"
        )
    return "\n".join(lines)


def render_push(summary: PushSummary) -> str:
    """The human summary of ``tbconvert push mlflow`` (stderr)."""
    known = f" (id {summary.experiment_id})" if summary.experiment_id else ""
    into = f"MLflow experiment {summary.experiment!r}{known} at {summary.tracking_uri}"
    lines = _pushed(summary.runs, summary.warnings, into, "artifacts", "MLflow", summary.dry_run)
    return "\n".join(lines)


def render_push_aim(summary: AimPushSummary) -> str:
    """The human summary of ``tbconvert push aim`` (stderr)."""
    files = "images, audio, texts and histograms"
    into = f"the Aim repo {summary.repo}"
    lines = _pushed(summary.runs, summary.warnings, into, files, "Aim", summary.dry_run)
    left_out = sum(run.not_sent for run in summary.runs)
    if left_out:
        lines.append(
            f"{left_out} points {'would not go' if summary.dry_run else 'not sent'}: "
            "Aim keeps one point per step, so a resumed series "
            "goes as its last attempt, and a step logged twice as its last point"
        )
    if summary.removed:
        lines.append(
            f"{summary.removed} steps removed from Aim: a later attempt of their series went back"
        )
    return "\n".join(lines)


def _pushed(
    runs: Sequence[RunPushed],
    warnings: Sequence[str],
    into: str,
    files: str,
    tracker: str,
    dry_run: bool = False,
) -> list[str]:
    """The lines every push's summary has: warnings, what was (or would be) sent, what was
    found."""
    created = sum(run.created for run in runs)
    lines = [f"warning: {warning}" for warning in warnings]
    lines.append(
        f"{'would push' if dry_run else 'pushed'} {len(runs)} "
        f"run{'s' if len(runs) != 1 else ''} ({created} new) into {into}: "
        f"{sum(run.metrics for run in runs)} metric points, "
        f"{sum(run.params for run in runs)} params, {sum(run.artifacts for run in runs)} {files}"
    )
    skipped = sum(run.resent_skipped for run in runs)
    if skipped:
        lines.append(f"{skipped} points an interrupted push had sent were found in {tracker}")
    return lines
