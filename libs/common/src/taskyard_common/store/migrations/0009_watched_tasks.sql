-- Until when someone watches the task (an API process holds an event stream or a long-poll on it, and renews
-- this while it does). Only then does a change publish a wake-up: the wake-ups of tasks nobody watches
-- would cost the broker and every writer for nothing.
ALTER TABLE tasks ADD COLUMN watched_until timestamptz;
