"""plotly figures built from the library's tables (never Streamlit)."""
from explorer.charts.gantt import CATEGORY_COLORS, gantt_figure, microstep_figure, superstep_figure, time_unit

__all__ = ["CATEGORY_COLORS", "gantt_figure", "microstep_figure", "superstep_figure", "time_unit"]
