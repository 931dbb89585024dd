"""Watching tasks: the process's watcher of wake-ups, event streams (SSE) and long-polls."""
