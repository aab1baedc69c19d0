"""Models: the few numbers that define one (spec), its operators and blocks (ops), its graph."""
