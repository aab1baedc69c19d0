"""Predict published training runs and compare (python -m explorer validate)."""
from explorer.validation.cases import Case, load_cases
from explorer.validation.run import TARGETS, ValidationRow, summarize, validate

__all__ = ["Case", "TARGETS", "ValidationRow", "load_cases", "summarize", "validate"]
