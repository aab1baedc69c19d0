"""Lesson 1 (explorer.lessons, slug 'double-level'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("double-level")
