"""Shadow traffic: the proxy, trace replay and the go / no-go verdict (docs/SHADOW.md)."""
