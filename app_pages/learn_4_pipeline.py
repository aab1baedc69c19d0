"""Lesson 4 (explorer.lessons, slug 'pipeline'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("pipeline")
