"""The reference server: an OpenAI-compatible server whose timing is known exactly, the
ground truth the client and the suites are tested against."""
