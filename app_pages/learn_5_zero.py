"""Lesson 5 (explorer.lessons, slug 'zero'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("zero")
