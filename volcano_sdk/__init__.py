"""Volcano Locks SDK."""
