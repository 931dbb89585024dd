-- Webhook redelivery: a delivery sent again on request (POST .../redeliver) gets a fresh retry window,
-- counted from then instead of from its creation; the outbox's age is counted from it too.
ALTER TABLE webhook_deliveries ADD COLUMN redelivered_at timestamptz;
