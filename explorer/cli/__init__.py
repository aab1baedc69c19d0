"""Command line: python -m explorer {models,clusters,evaluate,...}."""
