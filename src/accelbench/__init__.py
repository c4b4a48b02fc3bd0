"""accelbench: the truth about LLM inference on AI accelerators."""

__version__ = "0.1.0"
