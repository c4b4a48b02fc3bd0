"""What every command's command line must be, checked once for all commands, where the
words are parsed (before any option is converted or any command runs): the classes of
:func:`strict_class` replace typer's command and group classes across the whole tree
(:func:`harden`, from ``build_app``).

- An option that takes one value, given twice (``--isl 100 --isl 4000``; a flag pair
  given both ways, ``--stream --no-stream``), is refused: click would keep the last one
  silently. Options meant to repeat (``--slo``, ``--values``: ``multiple``) stay allowed.
- A text or path value given empty or blank (``--out ''``) is refused: ``Path('')`` is
  the current directory and an empty name reads as "not given". An option whose own
  default is the empty string (``monitor rules --amd-prefix``) still takes it.
- A text or path value with a control character (a newline) is refused: these values end
  up in file names, documents and one-line messages. :data:`FREE_TEXT` are the values
  where a newline is text (JSON, a command, an SQL statement).

docs/LIMITS.md ("Every command line") says the same."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, get_args, get_origin

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import DefaultPlaceholder

# click's usage errors (typer vendors click): found the way cli/main.py finds them
_UsageError: type[Exception] = {c.__name__: c for c in typer.BadParameter.__mro__}["UsageError"]

# the values where a control character (a newline, a tab) is part of the text
FREE_TEXT = frozenset({"--extra-body", "--alert-cmd", "--recover-cmd", "sql"})


def _name(param: Any) -> str:
    """How a message names ``param``: its long option (``--stream/--no-stream`` for a
    flag pair), or an argument's metavar."""
    if param.param_type_name != "option":
        return str(param.human_readable_name if hasattr(param, "human_readable_name") else
                   param.name).upper()  # fmt: skip
    first = max(param.opts, key=len)
    second = [o for o in getattr(param, "secondary_opts", []) if o.startswith("--")]
    return f"{first}/{second[0]}" if second else first


def repeatable(param: Any) -> bool:
    """Whether ``param`` may be given more than once: a ``multiple`` option, a count, an
    eager option such as ``--help`` (it exits before anything runs), or an argument."""
    return bool(
        param.param_type_name != "option"
        or param.multiple
        or getattr(param, "count", False)
        or param.is_eager
    )


def is_text(param: Any) -> bool:
    """Whether ``param`` takes text or a path (a ``str`` or ``Path``, or a list of them),
    not a number, a flag or a choice (those refuse an empty value themselves)."""
    desc = param.type_descriptor
    if desc.is_choice:
        return False
    ann = desc.annotation
    if get_origin(ann) in (list, tuple):
        args = [a for a in get_args(ann) if a is not Ellipsis]
        ann = args[0] if len(args) == 1 else None
    return ann is str or (isinstance(ann, type) and issubclass(ann, PurePath))


def check_value(param: Any, value: str) -> str | None:
    """Why ``value`` given to ``param`` (a text or path option or argument) is refused,
    or None."""
    if not value.strip() and param.default != "":
        optional = param.param_type_name == "option" and not param.required
        return "empty (give a value" + (", or leave the option out)" if optional else ")")
    if _name(param) not in FREE_TEXT and param.name not in FREE_TEXT:
        bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
        if bad is not None:
            return f"it holds a control character ({bad!r})"
    return None


def check_command_line(ctx: Any, opts: Mapping[str, object], order: list[Any]) -> None:
    """Refuse what ``order`` (every parameter, once per time the command line gave it)
    and ``opts`` (the words given to each) hold that no command may take (module doc)."""
    if ctx.resilient_parsing:  # shell completion: nothing runs
        return
    seen: set[int] = set()
    for param in order:
        if id(param) in seen and not repeatable(param):
            raise _UsageError(f"{_name(param)} is given more than once; give it once", ctx)
        seen.add(id(param))
    for param in dict.fromkeys(order):  # once each, in command-line order
        if not is_text(param):
            continue
        value = opts.get(param.name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            why = check_value(param, v) if isinstance(v, str) else None
            if why is not None:
                raise typer.BadParameter(why, ctx=ctx, param=param)


class _Strict:
    """The check of :func:`check_command_line`, on a typer command or group."""

    def make_parser(self, ctx: Any) -> Any:
        parser = super().make_parser(ctx)  # type: ignore[misc]
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, largs, order = parse(args)
            check_command_line(ctx, opts, order)
            return opts, largs, order

        parser.parse_args = parse_args
        return parser


_CLASSES: dict[type, type] = {}


def strict_class(cls: type) -> type:
    """``cls`` (a typer command or group class) with the check of this module."""
    if issubclass(cls, _Strict):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Strict{cls.__name__}", (_Strict, cls), {})
    return _CLASSES[cls]


def _chosen(*values: Any) -> Any:
    """The first value that is not typer's "not set" placeholder."""
    return next((v for v in values if not isinstance(v, DefaultPlaceholder)), None)


def harden(app: typer.Typer) -> None:
    """Give every command and group of ``app`` (and ``app`` itself) the strict class."""
    app.info.cls = strict_class(_chosen(app.info.cls) or TyperGroup)
    for info in app.registered_commands:
        info.cls = strict_class(info.cls or TyperCommand)
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        group.cls = strict_class(_chosen(group.cls, sub.info.cls) or TyperGroup)
        harden(sub)
