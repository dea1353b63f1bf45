"""``tbconvert tf`` (alias ``tensorboard``): convert a logdir into the store."""

from __future__ import annotations

import gc
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from tbconvert.cli.app import (
    CONTEXT_SETTINGS,
    EXIT_CODES_EPILOG,
    cli,
    json_option,
    run_library,
    store_option,
)
from tbconvert.plugins.names import KNOWN_PLUGINS
from tbconvert.reading.layouts import LAYOUTS

if TYPE_CHECKING:
    from tbconvert.conversion.options import ConvertOptions

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """A size in bytes, with an optional binary unit: 1048576, 1M, 1G."""
    text = value.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text[-1:] in ("K", "M", "G") else (text, "")
    if not number.isdigit() or int(number) == 0:
        raise click.BadParameter(f"{value!r} is not a size (bytes, or a number with K, M or G)")
    return int(number) * _UNITS[unit]


def _tf_command(name: str, hidden: bool = False) -> click.Command:
    @cli.command(name, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_EPILOG, hidden=hidden)
    @click.option(
        "--logdir",
        required=True,
        help="The TensorBoard log directory to convert: a path, or a URL of an object store "
        "or any fsspec file system (s3://bucket/prefix, gs://, az://, hf://), read by ranges.",
    )
    @store_option
    @click.option(
        "--layout",
        type=click.Choice(LAYOUTS),
        default="auto",
        show_default=True,
        help="auto: one run per training run, as PyTorch, tensorboardX, Lightning, Keras and "
        "other writers lay them out; aim: Aim's rules (depth decides).",
    )
    @click.option(
        "--flat", is_flag=True, help="Every directory holding event files is a run (no contexts)."
    )
    @click.option(
        "--skip-orphans",
        is_flag=True,
        help="Leave out event files directly in the logdir or in a group, as Aim does "
        "(default: keep them as a run of their directory).",
    )
    @click.option(
        "--dry-run",
        is_flag=True,
        help="Print the classification and what would be read; write nothing.",
    )
    @click.option(
        "--full", is_flag=True, help="Read every file again from its start (no duplicates result)."
    )
    @click.option(
        "--plugins",
        metavar="LIST",
        help="Comma-separated plugins to convert (default: all): "
        + ", ".join(KNOWN_PLUGINS)
        + " (everything kept raw).",
    )
    @click.option(
        "--run",
        "runs",
        multiple=True,
        metavar="GLOB",
        help="Only runs whose path matches (repeatable).",
    )
    @click.option(
        "--tag", "tags", multiple=True, metavar="GLOB", help="Only tags that match (repeatable)."
    )
    @click.option(
        "--exclude-tag",
        "exclude_tags",
        multiple=True,
        metavar="GLOB",
        help="Skip tags that match (repeatable).",
    )
    @click.option(
        "--jobs",
        "-j",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Decode files in this many worker processes (one writer); 2 pays on a machine "
        "with a core to spare.",
    )
    @click.option(
        "--source",
        envvar="TBCONVERT_SOURCE",
        metavar="NAME",
        help="The logdir's name in the store (default: its resolved absolute path). Runs are "
        "(source, run path): give each machine's logdir its own name on a shared "
        "server, and the same name to one directory mounted at different paths.",
    )
    @click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="An option of a URL logdir's file system, as fsspec takes it (repeatable): "
        "endpoint_url=http://host:9000, anon=true, profile=NAME. Credentials otherwise come "
        "from the protocol's usual chain (environment, config files, instance roles).",
    )
    @click.option(
        "--shard",
        metavar="K/N",
        help="Convert only the runs whose path hashes to K of N (K from 0 to N-1): N "
        "converters, on N machines, each with its own K, convert the logdir once together "
        "into one store (docs/scale-out.md).",
    )
    @click.option(
        "--upgrade-store",
        is_flag=True,
        help="Upgrade an older PostgreSQL store's schema first (SQLite files are "
        "upgraded anyway, after a backup). Only when no older converter writes to it.",
    )
    @click.option(
        "--watch",
        is_flag=True,
        help="Convert again every --interval seconds until Ctrl-C, then summarise.",
    )
    @click.option(
        "--interval",
        type=click.FloatRange(min=0.0),
        default=5.0,
        show_default=True,
        metavar="SECONDS",
        help="Pause between passes with --watch.",
    )
    @click.option(
        "--max-record-size",
        callback=_size,
        default="1G",
        show_default=True,
        metavar="SIZE",
        help="Skip records larger than this (bytes, or with K, M or G), unread: each is "
        "counted as damage, named with its file and offset, and the exit code is 3.",
    )
    @json_option
    @click.option("-q", "--quiet", is_flag=True, help="No progress, warnings or summary.")
    @click.option("-v", "--verbose", count=True, help="-v more detail, -vv tracebacks.")
    def tf(
        logdir: str,
        store: str,
        layout: str,
        flat: bool,
        skip_orphans: bool,
        dry_run: bool,
        full: bool,
        plugins: str | None,
        runs: tuple[str, ...],
        tags: tuple[str, ...],
        exclude_tags: tuple[str, ...],
        jobs: int,
        source: str | None,
        shard: str | None,
        upgrade_store: bool,
        storage_options: tuple[str, ...],
        watch: bool,
        interval: float,
        max_record_size: int,
        as_json: bool,
        quiet: bool,
        verbose: int,
    ) -> None:
        """Convert a TensorBoard logdir into the store (incremental: re-run any time).

        Each training run becomes one run: a directory with event files is a run,
        and the sub-directories writers make for a run (add_scalars keys, add_hparams
        sessions, train/validation) are its contexts (--layout aim: Aim's rules; --flat:
        no contexts). Event files directly in a directory that holds runs are orphans,
        named in a warning and kept as a run of their directory (. for the logdir), or
        left out with --skip-orphans. Whatever ran before, a plain run leaves the
        store as one clean conversion of the logdir as it is now would.

        \b
        Example:
          tbconvert tf --logdir ~/logs --store ~/logs.db
          tbconvert tf --logdir ~/logs --store ~/logs.db --run 'sweep*' --dry-run
          tbconvert tf --logdir ~/logs --store ~/logs.db --watch --interval 30
          tbconvert tf --logdir /data/tb --source gpu1 --store postgresql://me@db/tb
          tbconvert tf --logdir s3://bucket/tb --store ~/logs.db
          tbconvert tf --logdir /data/tb --source tb --shard 0/4 --store postgresql://me@db/tb
        """
        if watch and dry_run:
            raise click.UsageError("--watch and --dry-run do not go together")
        _import_library()
        from tbconvert.conversion.options import ConvertOptions, no_notice
        from tbconvert.filters import Selection, Shard

        options = run_library(
            verbose,
            lambda: ConvertOptions(
                layout=layout,
                flat=flat,
                skip_orphans=skip_orphans,
                dry_run=dry_run,
                full=full,
                selection=Selection(
                    plugins=_parse_plugins(plugins), tags=tags, exclude_tags=exclude_tags
                ),
                runs=runs,
                jobs=jobs,
                source=source,
                upgrade_store=upgrade_store,
                storage_options=_parse_storage_options(storage_options),
                max_record_size=max_record_size,
                progress=False if quiet else None,
                notify=no_notice if quiet else lambda line: click.echo(line, err=True),
                shard=None if shard is None else Shard.parse(shard),
            ),
        )
        summary = _run(
            logdir, store, options, watch=watch, interval=interval, verbose=verbose, quiet=quiet
        )
        report_summary(summary, as_json=as_json, quiet=quiet)
        sys.exit(summary.exit_code)

    return tf


def _parse_storage_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    from tbconvert.reading.remote import parse_storage_options

    try:
        return parse_storage_options(pairs)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--storage-option") from error


def _import_library() -> None:
    """Import the conversion library with the collector off."""
    # Importing the library (SQLAlchemy above all) builds tens of thousands of objects and
    # no garbage: with the collector off meanwhile, start-up is about 25 ms shorter.  What
    # the imports made lives as long as the process, so the collector need not scan it again
    # on every full collection of a conversion.  A command can do this; the library cannot
    # (a host process may have garbage among its objects).
    gc.disable()
    try:
        from tbconvert.conversion import pipeline  # noqa: F401
    finally:
        gc.freeze()
        gc.enable()


def _run(
    logdir: str,
    store: str,
    options: ConvertOptions,
    *,
    watch: bool,
    interval: float,
    verbose: int,
    quiet: bool,
) -> Any:
    """Convert (or watch) with ``options``; Ctrl-C and SIGTERM stop after the current
    transaction with one line saying what is kept (exit 130 / 143; a --watch ends
    normally)."""
    from tbconvert.conversion import pipeline as library
    from tbconvert.conversion import stopping
    from tbconvert.reading.remote import is_remote

    remote = is_remote(logdir)
    try:
        with stopping.on_signals():
            if watch:
                return run_library(
                    verbose,
                    lambda: library.watch(
                        logdir,
                        store,
                        interval=interval,
                        on_pass=None if quiet else _print_pass,
                        options=options,
                    ),
                    quiet_warnings=remote,
                )
            return run_library(
                verbose,
                lambda: library.convert(logdir, store, options),
                quiet_warnings=remote,
            )
    except stopping.Interrupted as stop:
        click.echo(
            f"{stop} after the current transaction: {stop.kept} is kept; run the same "
            "command again to continue",
            err=True,
        )
        sys.exit(stop.exit_code)
    except KeyboardInterrupt as stop:
        click.echo(
            "stopped at once: the transaction under way was rolled back, every one before it "
            "is kept; run the same command again to continue",
            err=True,
        )
        sys.exit(getattr(stop, "exit_code", 130))


def _print_pass(summary: Any) -> None:
    """One line per --watch pass that changed something: files, and points per plugin."""
    changed = (
        summary.files_read + summary.files_gone + summary.files_moved + summary.files_taken_over
    )
    if not changed:
        return
    points = ", ".join(f"{plugin} {count}" for plugin, count in sorted(summary.points.items()))
    parts = [f"{summary.files_read} files read"]
    if summary.files_gone:
        parts.append(f"{summary.files_gone} gone")
    if summary.files_moved:
        parts.append(f"{summary.files_moved} moved")
    if summary.files_taken_over:
        parts.append(f"{summary.files_taken_over} taken over")
    click.echo(
        f"{time.strftime('%H:%M:%S')} pass: {', '.join(parts)}; "
        f"{summary.total_points} points ({points or 'none'})",
        err=True,
    )


def _parse_plugins(plugins: str | None) -> frozenset[str] | None:
    if plugins is None:
        return None
    names = [name.strip() for name in plugins.split(",") if name.strip()]
    unknown = sorted(set(names) - set(KNOWN_PLUGINS))
    if unknown or not names:
        raise click.BadParameter(
            f"unknown plugin {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(KNOWN_PLUGINS)}",
            param_hint="--plugins",
        )
    return frozenset(names)


def report_summary(summary: Any, *, as_json: bool, quiet: bool) -> None:
    """What a conversion did: orphans, warnings and the summary on stderr (problems only
    when ``quiet``), and the summary as JSON on stdout with ``--json``."""
    if not quiet:
        if summary.stopped:
            click.echo(summary.stopped, err=True)
        # Kept orphans are named once, by the pass that first finds them; then counted.
        for orphan in [] if summary.orphans_skipped else summary.orphans_new:
            where = orphan.rsplit("/", 1)[0] if "/" in orphan else "."
            click.echo(
                "warning: orphan event file (in a directory that holds runs) kept as "
                f"run {where}: {orphan}",
                err=True,
            )
        for warning in summary.warnings:
            click.echo(f"warning: {warning}", err=True)
        from tbconvert.cli.render import render_summary

        click.echo(render_summary(summary), err=True)
    elif summary.problems:
        for problem in summary.problems[:10]:
            click.echo(f"error: {problem}", err=True)
    if as_json:
        click.echo(summary.to_json())


tf_command = _tf_command("tf")
tensorboard_command = _tf_command("tensorboard")
