"""Lesson 7 (explorer.lessons, slug 'hybrid'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("hybrid")
