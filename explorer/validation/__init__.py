"""Predict published training runs and compare (python -m explorer validate)."""
from .cases import Case, load_cases
from .run import ValidationRow, summarize, validate

__all__ = ["Case", "ValidationRow", "load_cases", "summarize", "validate"]
