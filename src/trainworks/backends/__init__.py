"""Execution backends behind one small interface with declared capabilities."""
