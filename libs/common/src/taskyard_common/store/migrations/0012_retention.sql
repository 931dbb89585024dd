-- Retention and deletion of finished tasks.

-- A tenant's own retention of finished tasks, in days; NULL: the deployment's default
-- (TASKYARD_TASK_RETENTION_DAYS). Set with taskyard-admin tenants retention.
ALTER TABLE tenant_limits ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 36500);

-- No new index on tasks: a task finishes after it is created, so "finished before the cutoff" implies
-- "created before the cutoff", and the retention rounds walk the existing created_at indexes
-- (tasks_created_idx, tasks_tenant_created_idx) from the oldest row up to the cutoff only. An index on
-- finished_at would cost every terminal transition one more index write for nothing.
