"""Load benchmark of chainkeys against a lean baseline (see bench/README.md)."""
