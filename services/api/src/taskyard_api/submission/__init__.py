"""The pipeline behind ``POST /v1/tasks``: rate limit, idempotency, batched inserts, the write-behind of
``published_at``, and the sweeper that announces what a crash left unannounced."""
