"""Lesson 8 (explorer.lessons, slug 'search'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("search")
