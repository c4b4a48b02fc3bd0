"""Predicting hardware the user does not own (issue 23): a step-level model of
continuous batching, fitted on public measurements, and the emulated server."""
