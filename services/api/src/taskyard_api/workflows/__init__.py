"""Workflows as the API shows them: a chain's steps (``then``), groups and their documents, and the links of
a task's document (its chain, its parent, the tasks it delegated to, its group)."""
