"""Lesson 2 (explorer.lessons, slug 'data-parallel'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("data-parallel")
