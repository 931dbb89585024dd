-- Per-tenant LLM budgets in USD (docs/llm-spend.md); a tenant without a row (or a NULL column) is unlimited.
CREATE TABLE tenant_budgets (
    tenant            text PRIMARY KEY,
    -- What the tenant's tasks created in one UTC calendar month may cost together: past it, submissions
    -- are refused (budget-exhausted).
    monthly_budget    double precision CHECK (monthly_budget >= 0),
    -- What one task may cost (routing and agent): a running task that reached it fails budget_exceeded
    -- before its next LLM call.
    max_cost_per_task double precision CHECK (max_cost_per_task > 0),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
