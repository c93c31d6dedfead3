"""Threads and loops for calls.

Daemon workers, off-loop calls, abandoned calls, tool calls with their time limits.
"""
