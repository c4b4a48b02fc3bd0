"""The suites built on the benchmark core: sweep, stress, shadow and MLPerf. Each suite keeps
beside its code the typed document it writes and the view that renders its report section."""
