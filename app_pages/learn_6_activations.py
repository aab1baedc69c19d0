"""Lesson 6 (explorer.lessons, slug 'activations'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("activations")
