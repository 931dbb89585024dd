-- A group's children that have not finished: what every child's end asks (is any left?) before it settles
-- the group. Without this index the question read every child of the group, once per child's end: quadratic
-- in the group's size (1,000 children: a million index entries), under the group's lock.
CREATE INDEX tasks_group_open_idx ON tasks (group_id)
    WHERE group_id IS NOT NULL AND group_role = 'child'
      AND status IN ('scheduled', 'pending', 'queued', 'running', 'retrying', 'waiting');
