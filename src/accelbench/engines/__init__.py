"""Engines accelbench starts for you: llama.cpp's llama-server and vLLM, the embedded default
(one function picks and starts either), and the tiny GGUF model written locally."""
