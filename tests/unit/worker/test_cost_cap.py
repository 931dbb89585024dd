import pytest

from taskyard_common.task_errors import TaskErrorType
from taskyard_worker.llm_calls import BudgetExceeded, CostCap


def test_a_task_under_its_limit_goes_on():
    CostCap(limit=2.0, spent=0.5).check(1.25)


@pytest.mark.parametrize(("spent", "attempt"), [(2.0, 0.0), (1.0, 1.0), (0.0, 3.0)])
def test_a_task_at_or_past_its_limit_makes_no_further_call(spent: float, attempt: float):
    with pytest.raises(BudgetExceeded, match=r"max_cost_per_task is 2\.000000 USD") as raised:
        CostCap(limit=2.0, spent=spent).check(attempt)
    assert raised.value.kind is TaskErrorType.BUDGET_EXCEEDED
