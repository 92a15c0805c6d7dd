"""Pinned component manifest and installers."""
