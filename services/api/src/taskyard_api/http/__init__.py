"""HTTP plumbing shared by every route: problem documents and their handlers, middlewares, OpenAPI touch-ups,
request parameters and page cursors. Nothing here knows what a task is for."""
