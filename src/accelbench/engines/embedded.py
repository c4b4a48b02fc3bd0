"""The embedded engine: what `run`, `sweep`, the stress suites, shadow and MLPerf start
on 127.0.0.1 when no --url is given. One function for all of them, so each can run on
either real engine (``--embedded-engine llama|vllm``) the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from accelbench.engines.llamacpp import LlamaServer
from accelbench.errors import UsageError

ENGINES = ("llama", "vllm")


@contextlib.contextmanager
def running_engine(
    engine: str,
    model: str,
    *,
    parallel: int,
    log: Callable[[str], None],
    context: int | None = None,
) -> Iterator[LlamaServer]:
    """Start ``engine`` serving ``model`` with ``parallel`` sequences at once (llama.cpp's
    slots, vLLM's ``--max-num-seqs``) and stop it on the way out, however that is.
    ``context`` (tokens per sequence) also lifts llama.cpp's trained context length (the
    generated tiny model then serves 131,072 tokens); vLLM gets it as ``--max-model-len``."""
    if engine == "vllm":
        from accelbench.engines.vllm import running_vllm_server

        if model == "smollm2":
            raise UsageError(
                "--embedded-engine vllm serves tiny or a Hugging Face model directory "
                "(--embedded-model): SmolLM2 ships only as GGUF"
            )
        extra = ["--max-num-seqs", str(parallel)]
        vllm = (
            running_vllm_server(model, log=log, extra_args=extra, max_model_len=context)
            if context
            else running_vllm_server(model, log=log, extra_args=extra)
        )
        with vllm as v:
            yield v
        return
    if engine != "llama":
        raise UsageError(f"--embedded-engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    from accelbench.engines.llamacpp import running_llama_server

    llama = (
        running_llama_server(
            model,
            parallel=parallel,
            log=log,
            ctx_per_slot=context,
            extra_args=["--override-kv", f"llama.context_length=int:{context}"],
        )  # fmt: skip
        if context
        else running_llama_server(model, parallel=parallel, log=log)
    )
    with llama as s:
        yield s
