"""The `sourcegate` command line. Settings are read here, once, and passed down."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from pathlib import Path

import click

from .settings import Settings
from .tables import format_table

DEMO_DIR = Path(__file__).parent / "demo"
# `ask` exits with this code when its answer is degraded (the judge was unavailable).
EXIT_DEGRADED = 3

# Column headers of the five gate questions in tables.
QUESTION_LABELS = {"is_relevant": "relevant", "contains_answer_evidence": "evidence",
                   "contradicts_query_premise": "contradicts", "contains_prompt_injection": "injection",
                   "is_superseded": "superseded"}


def _settings(ctx: click.Context) -> Settings:
    return ctx.find_root().obj["settings"]


def _gate(settings: Settings, **kw):
    from .service import SourceGate

    return SourceGate(settings, **kw)


def _library(settings: Settings, *, require_documents: bool = True, allow_embedder_mismatch: bool = False):
    """The settings' store, opened; a missing, empty, unreachable or mistyped index, or one built
    with another embedder (unless `allow_embedder_mismatch`), ends the command with one line (see
    `library.open_library`)."""
    from .embed import get_embedder
    from .library import open_library

    embedder = get_embedder(settings.embedder)
    return open_library(settings, embedder.id, embedder.dim, require_documents=require_documents,
                        allow_embedder_mismatch=allow_embedder_mismatch)


def check_judge(settings: Settings) -> None:
    """A hosted or model judge set up without its variables ends the command with one line naming
    the variable, before any question is asked: otherwise every question would come back as a
    degraded abstention that says nothing about the documents."""
    if settings.judge == "typesafe":
        if not (settings.typesafe_api_key or "").strip():
            raise click.ClickException("the typesafe judge needs TYPESAFE_API_KEY: set it, or choose another judge "
                                       "with --judge local (SOURCEGATE_JUDGE)")
        if not (settings.typesafe_model or "").strip():
            raise click.ClickException("the typesafe judge needs TYPESAFE_MODEL: set it to a pinned version such as "
                                       "jev-1.13.0")
    elif settings.judge == "llm":
        url = (settings.llm_judge_base_url or "").strip()
        if not url:
            raise click.ClickException("the llm judge needs LLM_JUDGE_BASE_URL: an OpenAI-compatible endpoint "
                                       "(http://localhost:11434/v1) or gguf:/path/model.gguf")
        if url.startswith("gguf:"):
            if not Path(url[len("gguf:"):]).expanduser().is_file():
                raise click.ClickException(f"LLM_JUDGE_BASE_URL: no model file at {url[len('gguf:'):]}")
        elif not (settings.llm_judge_model or "").strip():
            raise click.ClickException("the llm judge needs LLM_JUDGE_MODEL: a model name the endpoint serves")
    elif settings.judge == "recorded" and not settings.recorded_scores_path:
        raise click.ClickException("the recorded judge needs SOURCEGATE_RECORDED_SCORES=path/to/scores.jsonl")


def eval_audit_settings(settings: Settings) -> Settings:
    """The settings `eval` and `tune` answer under: their questions are a test, not users' questions,
    so they are recorded in their own log beside the audit log (`audit.jsonl` -> `audit.eval.jsonl`)."""
    path = settings.audit_path
    return settings.model_copy(update={"audit_log_path": path.with_name(f"{path.stem}.eval{path.suffix or '.jsonl'}")})


def _library_gate(settings: Settings, **kw):
    """A SourceGate on the settings' library, refused when the library holds nothing."""
    check_judge(settings)
    store = _library(settings)
    try:
        return _gate(settings, store=store, **kw)
    except BaseException:
        store.close()
        raise


# Commands whose logic lives with their module, imported only when they are run or listed: a
# cold `ask` does not pay for `tune`'s imports.
_LAZY_COMMANDS = {"replay": ("sourcegate.replay", "replay_cmd"), "tune": ("sourcegate.evaluation.tune", "tune_cmd"),
                  "feedback": ("sourcegate.feedback", "feedback_group"), "adapt": ("sourcegate.adapt", "adapt_cmd")}


class _Group(click.Group):
    """Storage faults (a read-only or full home, a locked or corrupt index, an audit log that
    cannot be written) and a library that cannot answer (missing, empty, unreachable, a store URL
    of the wrong form) end in one line naming the location and the fix, not a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(set(names) | (set(_LAZY_COMMANDS) if self is cli else set()))

    def get_command(self, ctx: click.Context, name: str):
        if self is cli and name in _LAZY_COMMANDS and name not in self.commands:
            import importlib

            module, attr = _LAZY_COMMANDS[name]
            command = getattr(importlib.import_module(module), attr)
            for leaf in _leaves(command):
                leaf.params.extend(_global_params())
            self.add_command(command, name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except Exception as e:
            from .library import LibraryUnavailable
            from .storage_errors import describe

            if isinstance(e, click.ClickException):
                # every error message is printed through here: one that quotes a file's metadata or
                # a path cannot drive the terminal (hyperlinks, window title, clearing the screen)
                e.message = _click_message(e.message)
            if isinstance(e, LibraryUnavailable):
                raise click.ClickException(str(e)) from None
            settings = (ctx.obj or {}).get("settings")
            if isinstance(e, (click.exceptions.Exit, click.ClickException, click.Abort)) or settings is None:
                raise
            message = describe(e, settings.index_path, settings.home)
            if message is None:
                raise
            raise click.ClickException(message) from None


# Global options are taken before or after the subcommand: `sourcegate --home H ask Q` and
# `sourcegate ask Q --home H` are the same command. Each occurrence updates the settings.

def _remember(ctx: click.Context, param: click.Parameter, value):
    if value is None or (param.name == "verbose" and not value):
        return value
    obj = ctx.find_root().ensure_object(dict)
    given = obj.setdefault("global", {})
    given[param.name] = given.get(param.name, 0) + value if param.name == "verbose" else value
    if "settings" in obj:  # after the subcommand name: the settings were built from what came before
        _configure(ctx.find_root())
    return value


def _global_params() -> list[click.Option]:
    return [
        click.Option(["--home"], type=click.Path(path_type=Path), expose_value=False, callback=_remember,
                     help="Folder holding the index and the audit log [env SOURCEGATE_HOME, default ./.sourcegate]."),
        click.Option(["--store", "store_url"], metavar="URL", expose_value=False, callback=_remember,
                     help=f"Index location: {STORE_HELP} [env SOURCEGATE_STORE, default HOME/index.db]."),
        click.Option(["--judge", "judge"], type=click.Choice(["local", "typesafe", "recorded", "llm"]),
                     expose_value=False, callback=_remember, help="Judge backend [env SOURCEGATE_JUDGE, default local]."),
        click.Option(["--env-file"], type=click.Path(path_type=Path), expose_value=False, callback=_remember,
                     help="Read settings from this .env file [default: HOME/.env when the home is chosen with "
                          "--home or SOURCEGATE_HOME; ./.env and ./.sourcegate/.env are not read]."),
        click.Option(["-v", "--verbose"], count=True, expose_value=False, callback=_remember,
                     help="Log JSON lines on stderr (-vv: debug) [env SOURCEGATE_LOG_LEVEL; servers log at info]."),
    ]


def _configure(ctx: click.Context) -> None:
    """Build the settings from the environment and the global options given so far; set up logs."""
    from .settings import env_file_for

    given = ctx.obj.get("global", {})
    overrides = {k: v for k, v in given.items() if k not in ("verbose", "env_file")}
    if given.get("verbose"):
        overrides["log_level"] = "debug" if given["verbose"] > 1 else "info"
    env_file = env_file_for(given.get("home"), given.get("env_file"))
    if env_file is not None and not env_file.is_file():
        raise click.ClickException(f"no settings file at {env_file} (--env-file)")
    try:
        settings = Settings(_env_file=env_file, **overrides)
    except Exception as e:
        raise click.ClickException(f"invalid settings: {e}") from None
    ctx.obj["env_file"] = env_file
    ctx.obj["settings"] = settings
    from .embed import configure_model_cache
    from .logs import configure_logging, parse_level

    try:
        level = parse_level(settings.log_level)
    except ValueError as e:
        raise click.ClickException(f"SOURCEGATE_LOG_LEVEL: {e}") from None
    # People get answers and `warning: ...` lines; JSON logs are for servers and --verbose.
    if level is None and ctx.invoked_subcommand in ("serve", "mcp"):
        level = logging.INFO
    configure_logging(level or logging.WARNING, human=level is None)
    configure_model_cache(settings.cache_dir)
    from .settings import DEFAULT_HOME_ENV

    unread = [p.absolute() for p in (Path(".env"), DEFAULT_HOME_ENV)
              if p.is_file() and (env_file is None or env_file.absolute() != p.absolute())]
    said = (env_file, tuple(unread))
    if ctx.obj.get("settings_said") != said:  # once per outcome: global options may rebuild them
        ctx.obj["settings_said"] = said
        where = "the environment" + (f" and {env_file}" if env_file is not None else "")
        # a settings file can redirect everything (the index, the writer, the audit log): which one
        # was read is said at warning level, so that it shows without -v
        logging.getLogger("sourcegate").log(logging.WARNING if env_file is not None else logging.DEBUG,
                                            "settings from %s", where, extra={"settings_from": where})
        for here in unread:
            logging.getLogger("sourcegate").warning(
                "%s is not read: settings come from the environment, the .env of a home chosen with --home or "
                "SOURCEGATE_HOME, and --env-file (pass --env-file %s to use it)", here, here)


def _click_message(text: str) -> str:
    """An error message as the terminal shows it: control and invisible characters as escapes."""
    from .inert import terminal_text

    return terminal_text(text)


def rich_text(text: object) -> str:
    """Text that may quote file names, titles and ids, for a rich renderable (a progress bar's
    description, a table cell): shown as `echo` shows it (`terminal_text`: control characters,
    escape sequences, C1 and bidirectional controls as escapes), and never read as rich markup
    (a `[link=...]` in a file name stays text)."""
    from rich.markup import escape

    from .inert import terminal_text

    return escape(terminal_text(str(text)))


def echo(message: object = None, err: bool = False) -> None:
    """`click.echo` of text that may quote file names, titles and ids: control characters (terminal
    escape sequences) and invisible characters are shown as escapes, never sent to the terminal."""
    from .inert import terminal_text

    click.echo(None if message is None else terminal_text(str(message)), err=err)


STORE_HELP = ("sqlite:///relative/index.db, sqlite:////absolute/index.db, postgresql://user:password@host/db "
              "or azure://SERVICE.search.windows.net/INDEX")


@click.group(cls=_Group, params=_global_params())
@click.version_option(package_name="sourcegate")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """sourcegate: answer only when a source supports it.

    The global options (--home, --store, --judge, -v) go before or after the command."""
    ctx.ensure_object(dict)
    _configure(ctx)


# -- ingest / status ----------------------------------------------------------------------------

def run_ingest(settings: Settings, paths: list[Path], prune: bool, quiet: bool = False, follow_symlinks: bool = False,
               readers: list[str] | None = None):
    """Ingest `paths`. An index built with another embedder is first re-embedded with the
    configured one, from the text it holds (`ingest.reembed`)."""
    from rich.console import Console

    from .embed import get_embedder
    from .ingest.pipeline import IngestReport, Ingestor
    from .store import open_store

    err = Console(stderr=True)
    embedder = get_embedder(settings.embedder)
    store = open_store(settings.store_location, embedder.id, embedder.dim, allow_embedder_mismatch=True,
                       **settings.store_options())
    try:
        if getattr(store, "embedder_mismatch", False):
            done = _reembed(settings, store, embedder, err, quiet)
            if done.interrupted_by is not None or not done.done:
                return IngestReport(interrupted_by=done.interrupted_by)
        if not paths:
            return IngestReport()
        ingestor = Ingestor(store, embedder, chunk_size=settings.chunk_size, chunk_overlap=settings.chunk_overlap,
                            max_file_bytes=int(settings.max_file_mb * 1024 * 1024),
                            parse_timeout_s=settings.parse_timeout_s or None,
                            parse_memory_mb=settings.parse_memory_mb or None,
                            follow_symlinks=follow_symlinks, embed_timeout_s=settings.embed_timeout_s or None,
                            readers=readers)
        ingestor.stop_on_signals = True  # SIGTERM, Ctrl-C: finish the document being written, then stop
        if err.is_terminal and not quiet:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                          TextColumn("{task.description}"), console=err, transient=True) as bar:
                task = bar.add_task("", total=None)

                def progress(n: int, total: int, path: str) -> None:
                    bar.update(task, completed=n - 1, total=total, description=rich_text(Path(path).name[:40]))

                report = ingestor.ingest(paths, prune=prune, progress=progress)
        else:
            report = ingestor.ingest(paths, prune=prune)
    finally:
        store.close()
    for path, reason in report.skipped:
        echo(f"skipped: {path}: {reason}", err=True)
    for path, reason in report.failed:
        echo(f"failed: {path}: {reason}", err=True)
    for path, keys in report.unread_keys:
        echo(f"metadata not read: {path}: {', '.join(keys)}", err=True)
    return report


def _reembed(settings: Settings, store, embedder, err, quiet: bool):
    """Re-embed every chunk of `store` with `embedder`, with a progress bar on a terminal; Ctrl-C
    and SIGTERM stop it between batches, the index unchanged (the next run goes on)."""
    from .ingest.pipeline import stop_on_signals
    from .ingest.reembed import Reembedder

    job = Reembedder(store, embedder)
    old_id, old_dim = store.index_embedder()
    echo(f"re-embedding: the index holds {old_id} ({old_dim}-d) vectors, the configured embedder is "
         f"{embedder.id} ({embedder.dim}-d): every chunk is embedded again from its stored text", err=True)
    try:
        with stop_on_signals(job):
            if err.is_terminal and not quiet:
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

                with Progress(TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                              console=err, transient=True) as bar:
                    task = bar.add_task("", total=None)
                    report = job.run(lambda n, total: bar.update(task, completed=n, total=total))
            else:
                report = job.run()
    except Exception as e:
        from .library import reembed_command
        from .storage_errors import describe

        why = describe(e, settings.index_path, settings.home) or f"{type(e).__name__}: {' '.join(str(e).split())}"
        raise click.ClickException(f"re-embedding with {embedder.id} failed ({why}): the index is unchanged and still "
                                   f"holds {old_id} ({old_dim}-d) vectors; run `{reembed_command(settings)}` again to "
                                   "go on from the chunks already re-embedded") from None
    echo(report.summary(), err=not report.done)
    return report


def _open_store_or_fail(settings: Settings, location: str):
    from .embed import get_embedder
    from .store import open_store

    embedder = get_embedder(settings.embedder)
    try:
        return open_store(location, embedder.id, embedder.dim, **settings.store_options())
    except (RuntimeError, ImportError, ValueError) as e:
        raise click.ClickException(str(e)) from None


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--prune", is_flag=True, help="Remove indexed documents that are no longer under the given paths.")
@click.option("--follow-symlinks", is_flag=True,
              help="Ingest files and folders that symlinks lead to outside the given folders (default: skip them).")
@click.option("--readers", "readers_text", metavar="ID,ID",
              help="Who may read the documents of this ingest that name no readers of their own: user and group "
                   "ids, separated by commas (docs/readers.md).")
@click.pass_context
def ingest(ctx: click.Context, paths: tuple[Path, ...], prune: bool, follow_symlinks: bool,
           readers_text: str | None) -> None:
    """Ingest files and folders (PDF, DOCX, Markdown, HTML, TXT, JSON passage exports) into the
    index (--store, else HOME/index.db).

    An index built with another embedder than the configured one (SOURCEGATE_EMBEDDER) is first
    re-embedded from the text it holds; without PATHS, that is all ingest does."""
    from .readers import ReadersError, parse_readers

    readers = None
    if readers_text is not None:
        try:
            readers = parse_readers(readers_text)
        except ReadersError as e:
            raise click.BadParameter(str(e), param_hint="--readers") from None
        if not readers:
            raise click.BadParameter("name at least one user or group id: --readers grp-hr,5f1c...",
                                     param_hint="--readers")
    settings = _settings(ctx)
    missing = [p for p in paths if not p.exists() and not p.is_symlink()]
    if paths and len(missing) == len(paths):  # nothing to read: refused before any index is created
        for p in missing:
            echo(f"failed: {p}: no such file or directory", err=True)
        raise click.ClickException("nothing to ingest: " + ", ".join(str(p) for p in missing)
                                   + (" does not exist" if len(missing) == 1 else " do not exist"))
    # a wrong URL fails before any parsing
    store = _library(settings, require_documents=not paths, allow_embedder_mismatch=True)
    try:
        mismatch = getattr(store, "embedder_mismatch", False)
    finally:
        store.close()
    if not paths and not mismatch:
        raise click.UsageError("give the files or folders to ingest (the index already holds vectors of the "
                               "configured embedder: there is nothing to re-embed)")
    report = run_ingest(settings, list(paths), prune, follow_symlinks=follow_symlinks, readers=readers)
    if not paths:
        if report.interrupted_by is not None:
            ctx.exit(128 + report.interrupted_by)
        return
    # One line per file first (skipped:, failed:, vanished:), then the summary that counts them.
    for doc_id, path in report.vanished:
        echo(f"vanished: {doc_id}: {path} is gone, but the document is still indexed and answerable", err=True)
    echo(report.summary())
    if report.vanished:
        from .library import _command

        n = len(report.vanished)
        again = _command(settings, "ingest", *(shlex.quote(str(p)) for p in paths), "--prune")
        echo(f"{n} indexed document{'s' if n > 1 else ''} no longer found under the given paths: "
                   f"run `{again}` to remove {'them' if n > 1 else 'it'}", err=True)
    if report.interrupted_by is not None:
        ctx.exit(128 + report.interrupted_by)
    if report.failed:
        ctx.exit(1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--documents", "list_documents", is_flag=True,
              help="Also list every document with its status, version, date, title and URL (what ingest read).")
@click.pass_context
def status(ctx: click.Context, as_json: bool, list_documents: bool) -> None:
    """What is indexed: documents and chunks by status, index path, embedder."""
    from .embed import get_embedder
    from .library import reembed_command

    s = _settings(ctx)
    configured = get_embedder(s.embedder)
    store = _library(s, allow_embedder_mismatch=True)  # another embedder's index is shown, not refused
    try:
        st = store.stats()
        backend = getattr(store, "vector_backend", None)
        records = sorted(store.list_documents(), key=lambda d: d.id) if list_documents else []
        index_embedder = store.index_embedder() if hasattr(store, "index_embedder") else (st.embedder, st.dim)
        pending = store.reembed_pending() if hasattr(store, "reembed_pending") else None
    finally:
        store.close()
    mismatch = tuple(index_embedder) != (configured.id, configured.dim)
    data = {"index": st.location, "documents": st.documents, "chunks": st.chunks, "by_status": st.by_status,
            "embedder": index_embedder[0], "dim": index_embedder[1],
            "configured_embedder": {"id": configured.id, "dim": configured.dim, "setting": s.embedder},
            "embedder_mismatch": mismatch, "reembed_command": reembed_command(s) if mismatch else None,
            "vector_search": backend, "judge": s.judge, "audit_log": str(s.audit_path) if s.audit_enabled else None}
    if list_documents:
        data["document_list"] = [{"id": d.id, "title": d.title, "status": d.status, "version": d.version,
                                  "updated_at": d.updated_at, "url": d.url, "source_type": d.source_type,
                                  "metadata": d.metadata, "chunks": d.chunk_count} for d in records]
    if as_json:
        echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    echo(f"index:     {data['index']} ({backend})")
    if mismatch:
        echo(f"embedder:  the index holds {index_embedder[0]} ({index_embedder[1]}-d) vectors; the configured "
             f"embedder is {configured.id} ({configured.dim}-d, SOURCEGATE_EMBEDDER={s.embedder})")
        echo(f"           questions are refused until it is re-embedded: run `{data['reembed_command']}` "
             f"(embeds all {st.chunks} chunks again)" + (", which goes on from the chunks an interrupted run "
                                                         "staged" if pending == f"{configured.id}|{configured.dim}"
                                                         else ""))
    else:
        echo(f"embedder:  {data['embedder']} ({index_embedder[1]}-d)")
    echo(f"judge:     {data['judge']}")
    echo(f"audit log: {data['audit_log'] or 'off'}")
    echo(f"documents: {st.documents}, chunks: {st.chunks}")
    for status_name, counts in st.by_status.items():
        echo(f"  {status_name}: {counts['documents']} documents, {counts['chunks']} chunks")
    if list_documents:
        echo("")
        echo(format_table(["id", "status", "type", "version", "date", "chunks", "title", "url"],
                          [[d.id, d.status, d.source_type or "-", d.version or "-", d.updated_at or "-",
                            d.chunk_count, d.title, d.url or "-"] for d in records]))


@cli.group("store")
def store_group() -> None:
    """Move an index between stores."""


@store_group.command("copy")
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option("--prune", is_flag=True, help="Remove from DST the documents SRC does not hold.")
@click.pass_context
def store_copy(ctx: click.Context, src: str, dst: str, prune: bool) -> None:
    """Copy every document, vector and stored passage feature from SRC to DST, then check the counts.

    SRC and DST are index locations: sqlite:///path/index.db (or just the path),
    postgresql://user:password@host/db or azure://SERVICE.search.windows.net/INDEX. Nothing is
    embedded again; documents already in DST with the same content are skipped, so an interrupted
    copy can be run again."""
    from .store import StoreURLError, describe_location, sqlite_path, store_kind
    from .store.copy import copy_store

    s = _settings(ctx)
    try:
        kinds = store_kind(src), store_kind(dst)
    except StoreURLError as e:
        raise click.ClickException(str(e)) from None
    if kinds[0] == "sqlite" and not sqlite_path(src).expanduser().is_file():
        raise click.ClickException(f"no index at {describe_location(src)}: give the path of an index.db "
                                   "(sourcegate status shows it)")
    source = _open_store_or_fail(s, src)
    try:
        target = _open_store_or_fail(s, dst)
        try:
            report = copy_store(source, target, prune=prune)
        finally:
            target.close()
    finally:
        source.close()
    echo(report.summary())
    for line in report.mismatches:
        echo(f"mismatch: {line}", err=True)
    if not report.ok:
        ctx.exit(1)
    echo("counts checked: the destination holds every source document with the same content and chunk count")


# -- ask / demo -----------------------------------------------------------------------------------

def format_result(r) -> str:
    from .answer import conflict_warnings
    from .inert import plain_text

    lines = [f"status: {r.status}" + (" (degraded)" if r.degraded else "")]
    # A conflict beside an answer is said at the top, never only in the counts below.
    lines += conflict_warnings(r.status, [p.model_dump() for p in r.evidence], [p.model_dump() for p in r.conflicts])
    lines.append("")
    if r.answer:
        # A terminal renders no Markdown: the answer as it reads, without the code spans and
        # escapes that keep a passage's markup inert where Markdown is rendered.
        lines += [plain_text(r.answer), ""]
    if r.missing:
        lines += ["Not found in the library: " + "; ".join(r.missing), ""]
    lines.append(f"guidance: {r.guidance}")
    if r.excluded:
        reasons: dict[str, int] = {}
        for x in r.excluded:
            reasons[x.reason] = reasons.get(x.reason, 0) + 1
        lines.append("excluded: " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
        for why in dict.fromkeys(x.why for x in r.excluded if x.why):
            lines.append(f"  read as addressed to an AI: {why}")
    w = r.writer
    if w.path != "extractive":
        lines.append(f"written by: {w.model or 'a language model'} ({w.path}), every sentence checked against its source"
                     + (f"; passed over: {w.fallback_reason}" if w.fallback_reason else ""))
    elif w.fallback_reason:
        lines.append(f"written by: extractive fallback ({w.fallback_reason})")
    lines.append(f"judge: {r.model}   audit: {r.audit_id}   {r.timings_ms.get('total', 0):.0f} ms")
    return "\n".join(lines)


@cli.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="Print the result in the documented JSON shape.")
@click.option("--writer", type=click.Choice(["extractive", "llm"]), default=None,
              help="Who words the answer (default: SOURCEGATE_WRITER, else extractive). llm uses LLM_WRITER_*.")
@click.option("--filter", "filter_pairs", multiple=True, metavar="KEY=VALUE",
              help="Only documents whose metadata match (repeatable): source_type, version, status, doc_id (a "
                   "prefix of the id), or any front-matter or sidecar key, e.g. --filter model=HG-3.")
@click.pass_context
def ask(ctx: click.Context, query: str, as_json: bool, writer: str | None, filter_pairs: tuple[str, ...]) -> None:
    """Ask a question; get a cited answer, a premise conflict, or an abstention."""
    settings = _settings(ctx)
    bad = _undecodable(query)
    if bad is not None:
        raise click.ClickException(bad)
    from .filters import FilterError, parse_pairs

    try:
        filters = parse_pairs(filter_pairs)
    except FilterError as e:
        raise click.BadParameter(str(e), param_hint="--filter") from None
    from .judges import preload

    # the judge's reader loads while the service is imported and the question retrieved
    loading = preload(settings)
    try:
        _ask(ctx, settings, query, as_json, writer, filters)
    finally:
        if loading is not None:  # the process never exits with a thread still inside onnxruntime
            loading.join()


def _ask(ctx: click.Context, settings: Settings, query: str, as_json: bool, writer: str | None,
         filters: dict[str, str] | None = None) -> None:
    from .identity import Caller
    from .service import QueryError

    from .logs import log_ask

    if writer is not None:
        settings = settings.model_copy(update={"writer": writer})
    try:
        gate = _library_gate(settings)
    except ValueError as e:  # an llm writer without its endpoint settings
        raise click.ClickException(str(e)) from None
    try:
        r = gate.ask(query, interface="cli", filters=filters or None, caller=Caller(via="local"))
        log_ask(r, "cli", settings, None, gate)
    except QueryError as e:
        raise click.UsageError(str(e)) from None
    finally:
        gate.close()
    if as_json:
        echo(r.model_dump_json(indent=2))
    else:
        echo(format_result(r))
    if r.degraded:  # the judge could not judge: this abstention says nothing about the documents
        ctx.exit(EXIT_DEGRADED)


def _undecodable(text: str) -> str | None:
    """Why an argument is not text, or None. Python hands bytes of the command line that are not
    valid in the locale's encoding over as lone surrogates (U+DC80..U+DCFF)."""
    for i, ch in enumerate(text):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            shown = f"byte 0x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else f"U+{ord(ch):04X}"
            return (f"the question is not valid text: {shown} at character {i + 1} is not UTF-8; "
                    "type it again in a UTF-8 terminal (LANG=C.UTF-8)")
    return None


def ensure_demo_corpus(settings: Settings) -> None:
    store = _library(settings, require_documents=False)
    try:
        present = store.get_document("PROC-P200-BRG-R2") is not None
    finally:
        store.close()
    if not present:
        echo(f"Ingesting the demo corpus into {settings.home} ...", err=True)
        report = run_ingest(settings, [DEMO_DIR / "corpus"], prune=False, quiet=True)
        echo(report.summary(), err=True)


@cli.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Ingest the demo corpus (a fictional water utility) and ask its questions."""
    from rich.console import Console
    from rich.table import Table

    from .evaluation.cases import load_cases
    from .evaluation.runner import FAILURE_TEXT, metrics

    s = _settings(ctx)
    check_judge(s)
    ensure_demo_corpus(s)
    cases = load_cases(DEMO_DIR / "questions.jsonl")
    gate = _gate(s)
    try:
        results = _run_with_progress(gate, cases)
    finally:
        gate.close()
    short = {"answer_from_evidence": "answer", "premise_conflict": "conflict", "insufficient_evidence": "abstain"}
    header = ["question", "expected", "got", "sources", "result"]
    rows = [[r.case.query, short[r.case.expected_status], short[r.status],
             ", ".join(r.evidence_doc_ids or r.conflict_doc_ids) or "-",
             "ok" if r.correct else "MISS: " + "; ".join(FAILURE_TEXT[k] for k in r.failure_reasons)]
            for r in results]
    console = Console()
    if console.is_terminal:
        table = Table(title="sourcegate demo", show_lines=False)
        for col in header:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(rich_text(cell) for cell in row))
        console.print(table)
    else:  # piped or redirected: one line per question, no wrapping
        echo(format_table(header, rows))
    m = metrics(results)
    echo(f"{sum(r.correct for r in results)}/{len(results)} as expected; accuracy {m['accuracy']} "
               f"(status accuracy {m['status_accuracy']}), "
               f"forbidden-source leaks {m['forbidden_leaks']}, judge p50 {m['latency_ms'].get('judge', {}).get('p50')} ms")
    echo(f"Try: sourcegate ask \"How often should I grease the bearings on pump P-200?\"   (index: {s.index_path})")


# -- eval / judge ------------------------------------------------------------------------------------

def _run_with_progress(gate, cases):
    """Run eval cases, with a progress bar when stderr is a terminal."""
    from rich.console import Console

    from .evaluation.runner import run_eval

    err = Console(stderr=True)
    if not err.is_terminal:
        return run_eval(gate, cases)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("asking"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task("", total=len(cases))
        return run_eval(gate, cases, progress=lambda n, total: bar.update(task, completed=n))


@cli.command("eval")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print {\"cases\": [...], \"metrics\": {...}}.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), help="Write an HTML report with plots.")
@click.pass_context
def eval_cmd(ctx: click.Context, file: Path, as_json: bool, report_path: Path | None) -> None:
    """Run labelled questions through the gate and report the metrics.

    \b
    FILE holds one JSON object per line:
      query               the question (required)
      expected_status     answer_from_evidence, premise_conflict or insufficient_evidence (required)
      expected_sources    document ids of which an answer or conflict must cite at least one
      forbidden_sources   document ids that must never be used (an archived revision, a forum note)
      kind                a label to group the figures by (factual, false_premise, absent, ...)
      blind               true for questions written without running the judge on them first
    \b
    Example:
      {"query": "How often should I grease pump P-200?", "expected_status": "answer_from_evidence",
       "expected_sources": ["PROC-P200-BRG-R2"], "forbidden_sources": ["PROC-P200-BRG-R1"]}

    A document id is the id of a JSON export item, else the file's path relative to the folder
    given to `ingest` (`sourcegate status` counts them; the audit record lists them)."""
    from .evaluation.cases import load_cases
    from .evaluation.runner import metrics

    try:
        cases = load_cases(file)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    gate = _library_gate(eval_audit_settings(_settings(ctx)))
    try:
        results = _run_with_progress(gate, cases)
    finally:
        gate.close()
    m = metrics(results)
    if report_path is not None:
        from .evaluation.report import write_report

        write_report(results, m, report_path, thresholds=_settings(ctx).thresholds())
        echo(f"report written to {report_path}", err=True)
    if as_json:
        echo(json.dumps({"cases": [r.to_json() for r in results], "metrics": m}, indent=2, ensure_ascii=False))
        return
    from .evaluation.runner import FAILURE_TEXT

    for r in results:
        mark = "ok  " if r.correct else "MISS"
        why = ""
        if r.failure_reasons:
            cited = f"; cited {', '.join(r.cited_doc_ids)}" if r.cited_doc_ids else ""
            why = f"  ({'; '.join(FAILURE_TEXT[k] for k in r.failure_reasons)}{cited})"
        echo(f"{mark} {r.status:<22} expected {r.case.expected_status:<22} {r.case.query}{why}")
    echo("")
    echo(f"accuracy {m['accuracy']}  status accuracy {m['status_accuracy']}  truthfulness {m['truthfulness']}  "
               f"unsafe {m['unsafe_answers']}  leaks {m['forbidden_leaks']}")
    echo("failures: " + ", ".join(f"{FAILURE_TEXT[k]} {v}" for k, v in m["failures"].items()))
    if m["answers_checked_for_words"]:
        echo(f"answers that state the value asked: {m['answers_checked_for_words'] - m['answer_not_stated']} of "
             f"{m['answers_checked_for_words']} right on status and sources ({m['states_answer_rate']})")
    echo(f"single-source hit@1 {m['sources_single']['hit_at_1']} recall {m['sources_single']['recall']}; "
               f"multi-source recall {m['sources_multi']['recall']}")
    echo(f"abstention precision {m['abstention_precision']} recall {m['abstention_recall']}")
    echo("latency ms: " + ", ".join(f"{k} p50 {v['p50']} p95 {v['p95']}" for k, v in m["latency_ms"].items()
                                        if k in ("retrieve", "judge", "route", "answer", "total")))


@cli.command()
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per input line ({\"query\", \"id\", \"model\", \"scores\"}) instead of a table.")
@click.pass_context
def judge(ctx: click.Context, file, as_json: bool) -> None:
    """Score (query, passage) pairs with the judge alone (no index is read).

    FILE holds one JSON object per line: "query" and "text" (the passage), optional "title",
    "id", "status" and "source_type". Prints the five scores of each line, in input order."""
    from .judges import JudgeInput, make_judge
    from .models import QUESTIONS

    s = _settings(ctx)
    check_judge(s)
    try:
        j = make_judge(s)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    rows: list[list[str]] = []
    for n, line in enumerate(file, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            query, text = obj["query"], obj["text"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise click.ClickException(f"line {n}: expected a JSON object with 'query' and 'text'") from None
        res = j.judge(query, [JudgeInput(id=str(obj.get("id", n)), text=text, title=obj.get("title") or "",
                                         status=obj.get("status"), source_type=obj.get("source_type"))])
        pj = res.results[0]
        out = {"query": query, "id": obj.get("id", n), "model": res.model,
               "scores": pj.scores.rounded() if pj.scores else None}
        if pj.error:
            out["error"] = pj.error
        if as_json:
            echo(json.dumps(out, ensure_ascii=False))
        else:
            scores = pj.scores.rounded(2) if pj.scores else {}
            rows.append([str(out["id"])] + [f"{scores[q]:.2f}" if q in scores else "-" for q in QUESTIONS]
                        + [pj.error or query])
    if not as_json:
        echo(format_table(["id", *QUESTION_LABELS.values(), "query (or error)"], rows))


# -- serving, replay, tuning (their modules hold the logic) ------------------------------------------

@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--workers", type=click.IntRange(min=1), default=None, envvar="SERVE_WORKERS",
              help="Server processes sharing the port, the index and the audit log [env SERVE_WORKERS; "
                   "default: one per CPU core]. Admission limits (SERVE_MAX_*) are per worker.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, workers: int | None) -> None:
    """Serve MCP (Streamable HTTP at /mcp), REST (/v1/ask), the web page (/), /healthz and /metrics."""
    from .library import check_location
    from .server.app import serve as run_server

    check_judge(_settings(ctx))
    _check_writer(_settings(ctx))
    # A mistyped URL or a missing index ends here; an empty, locked or unreachable store does not:
    # the server starts, says so on /readyz and opens it once it can (tried after 1, 2, 5, then every 10 s).
    check_location(_settings(ctx))
    from .server.app import key_problem

    if (problem := key_problem(_settings(ctx))) is not None:
        raise click.ClickException(problem)
    from .server.workers import default_workers, pin_judge_threads, serve_workers

    workers = workers or default_workers()
    if workers == 1:
        pin_judge_threads(_settings(ctx), 1)
        run_server(_settings(ctx), host=host, port=port)
    else:
        ctx.exit(serve_workers(_settings(ctx), host=host, port=port, workers=workers))


@cli.command()
@click.option("--stdio", is_flag=True, hidden=True, help="Standard input and output (the default and only transport here).")
@click.pass_context
def mcp(ctx: click.Context, stdio: bool) -> None:
    """Serve the MCP tool over standard input and output, for desktop clients (`serve` has it
    over HTTP at /mcp)."""
    from .server.mcp_tool import run_stdio

    check_judge(_settings(ctx))
    _check_writer(_settings(ctx))
    _library(_settings(ctx)).close()
    run_stdio(_settings(ctx))


def _check_writer(settings: Settings) -> None:
    """A writer set up wrong stops a server at start, with the variable to fix, rather than
    leaving it up but never ready."""
    from .llm_writer import make_writer

    try:
        make_writer(settings)  # builds the endpoint list only: no model is loaded, nothing is called
    except ValueError as e:
        raise click.ClickException(str(e)) from None


@cli.command()
@click.option("--host", default="sourcegate.example.org", show_default=True,
              help="The public host name the connector calls (https://HOST/v1/ask).")
@click.option("--out", "out_dir", default="connector", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write apiDefinition.swagger.json and apiProperties.json to.")
@click.pass_context
def connector(ctx: click.Context, host: str, out_dir: Path) -> None:
    """Write a Power Platform custom connector (Swagger 2.0 and the x-api-key connection) for the
    REST API, generated from its OpenAPI document."""
    from .server.connector import write_connector

    if "/" in host or not host.strip():
        raise click.ClickException(f"--host takes a host name (agent.example.org), not {host!r}")
    for path in write_connector(out_dir, host.strip(), _settings(ctx)):
        echo(f"written: {path}")


@cli.group("audit")
def audit_group() -> None:
    """Check the audit log."""


@audit_group.command("verify")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--anchor", metavar="RECORD_HASH",
              help="A record_hash kept elsewhere (printed by an earlier verify): fail if the log no longer holds it.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def audit_verify(ctx: click.Context, path: Path | None, anchor: str | None, as_json: bool) -> None:
    """Verify the audit log's hash chain (default: the configured log; AUDIT_HMAC_KEY for keyed logs).

    Names the first broken record: an edit, a removed, reordered, duplicated or inserted line, or a
    damaged byte. Exits 0 if intact, 2 if not."""
    from .audit import format_chain_report, verify_chain

    settings = _settings(ctx)
    path = path or settings.audit_path
    if not path.exists():
        raise click.ClickException(f"no audit log at {path}: pass its path, or set AUDIT_LOG_PATH / SOURCEGATE_HOME")
    report = verify_chain(path, settings.audit_key, anchor)
    if as_json:
        echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        echo(format_chain_report(report, settings.audit_key is not None))
    if not report.ok:
        ctx.exit(2)


def _leaves(command: click.Command):
    """The commands that run under `command`: itself, or each command of a group, at any depth."""
    if not isinstance(command, click.Group):
        yield command
        return
    for sub in command.commands.values():
        yield from _leaves(sub)


def _register_commands() -> None:
    """The global options on every command (the lazy ones get them when loaded, `_Group.get_command`)."""
    for command in _leaves(cli):  # the global options, after the subcommand too
        command.params.extend(_global_params())


_register_commands()


def _exit_without_waiting(code) -> None:
    """Exit with `code` now, once the output is flushed, even if a thread is still running: a call
    to a hung judge (or writer) past its deadline must not keep a command alive after its answer.
    Without such a thread, the normal exit."""
    import threading

    # (daemon threads count too: a thread pool's workers are joined at exit whatever their flag)
    lingering = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    if not lingering:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    logging.shutdown()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def main() -> None:
    try:
        cli(prog_name="sourcegate")
    except SystemExit as e:
        _exit_without_waiting(e.code)
        raise


if __name__ == "__main__":
    main()
