"""`accelbench trace agent` (docs/WORKLOADS.md, "Agent traces"): thin; the generator is
accelbench.workload.agenttrace."""

from __future__ import annotations

from pathlib import Path

import typer

trace_app = typer.Typer(
    help="Make request traces that run --trace and shadow replay read.",
    no_args_is_help=True,
)


@trace_app.command("agent")
def agent_cmd(
    ctx: typer.Context,
    sessions: int = typer.Option(
        ..., "--sessions", help="How many agent sessions (each a loop of tool-call turns)."
    ),
    turns: int = typer.Option(4, "--turns", help="Turns (requests) per session."),
    system_tokens: int = typer.Option(
        1024,
        "--system-tokens",
        help="Tokens of the system prompt every session starts with (its full blocks get "
        "the same hash_ids in every session).",
    ),
    user_tokens: int = typer.Option(
        128, "--user-tokens", help="Tokens of each session's task, after the system prompt."
    ),
    tool_tokens: int = typer.Option(
        256,
        "--tool-tokens",
        help="Tokens of a tool's result, added to the context before each later turn.",
    ),
    osl: int = typer.Option(
        128, "--osl", help="Output tokens per turn (the reply joins the next turn's context)."
    ),
    spread: float = typer.Option(
        0.5,
        "--spread",
        help="Task, tool and output lengths are uniform within this fraction of their "
        "figure (0: exactly the figure).",
    ),
    rate: float = typer.Option(
        2.0, "--rate", help="Sessions a second (Poisson arrivals of their first turns)."
    ),
    tool_ms: float = typer.Option(
        500.0,
        "--tool-ms",
        help="Mean tool run time in ms (exponential): a later turn's delay after the "
        "previous reply ended.",
    ),
    block_size: int = typer.Option(
        512,
        "--block-size",
        help="Tokens per hash_ids block (give run --trace the same --block-size).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed: the same seed makes the same trace."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="The JSONL file to write (atomically: all or nothing)."
    ),
) -> None:
    """Write a synthetic agent trace: Mooncake-style JSONL with session_id, turn,
    timestamp (first turn, ms), delay (later turns, ms), input_length, output_length and
    hash_ids, where each turn's context is the previous turn's context plus its reply
    plus a tool result, so each turn's hash_ids start with the previous turn's full
    blocks. Replay it with `accelbench run --trace FILE`."""
    from accelbench.cli.options import given_options, refuse_unmet
    from accelbench.workload.agenttrace import AgentTraceSpec, write_agent_trace

    # a tool result and its run time come between two turns: one turn has neither
    later = "with --turns above 1 (a tool's result and run time come before a later turn)"
    refuse_unmet(given_options(ctx), [("--tool-tokens", turns > 1, later),
                                      ("--tool-ms", turns > 1, later),
                                      # the first session starts at 0: the rate spaces the rest
                                      ("--rate", sessions != 1, "with --sessions above 1 "
                                       "(the first session starts at 0; the rate spaces the "
                                       "later ones)")])  # fmt: skip

    spec = AgentTraceSpec(
        sessions=sessions, turns=turns, system_tokens=system_tokens, user_tokens=user_tokens,
        tool_tokens=tool_tokens, osl=osl, rate=rate, tool_ms=tool_ms, spread=spread,
        block_size=block_size, seed=seed,
    )  # fmt: skip
    refuse_unmet(given_options(ctx), [
        ("--seed", spec.checked().draws(), "where something is drawn: --sessions above 1 "
         "(arrivals), lengths that --spread varies (after rounding), or --tool-ms above 0 "
         "with --turns above 1"),
    ])  # fmt: skip
    n = write_agent_trace(spec, out)
    typer.echo(f"{out}: {n} requests in {sessions} sessions")


def register(app: typer.Typer) -> None:
    """Attach the ``trace`` group to the main app."""
    app.add_typer(trace_app, name="trace")
