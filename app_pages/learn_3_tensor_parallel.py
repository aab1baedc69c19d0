"""Lesson 3 (explorer.lessons, slug 'tensor-parallel'): drawn by lesson_view.render."""
from app_pages.lesson_view import render

render("tensor-parallel")
