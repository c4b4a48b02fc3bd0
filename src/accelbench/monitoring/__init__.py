"""Connects accelbench to the monitoring stack people run: Prometheus rules generated from
the health rules, a Grafana dashboard, and a guarded recovery-action runner."""
