"""status.py: conditions from observations; a condition keeps its transition time while it holds."""

from taskyard_operator.status import Check, Observation, status

OK = Check(True, "Fine")


def _conditions(s):
    return {c["type"]: c for c in s["conditions"]}


def test_all_ready():
    s = status(Observation(3, OK, OK, OK, queued=2, running=1, dead_letters=0, replicas=1), None, "t1")
    c = _conditions(s)
    assert {k: v["status"] for k, v in c.items()} == {
        "Ready": "True", "QueueReady": "True", "WorkloadReady": "True", "ScalerReady": "True"
    }  # fmt: skip
    assert s["observedGeneration"] == 3 and c["Ready"]["observedGeneration"] == 3
    assert (s["queued"], s["running"], s["deadLetters"], s["replicas"]) == (2, 1, 0, 1)


def test_a_failing_part_makes_ready_false_with_its_reason():
    obs = Observation(1, Check(False, "Missing", "no queue q"), OK, Check(None, "Pending"))
    c = _conditions(status(obs, None, "t1"))
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "QueueNotReady"
    assert c["Ready"]["message"] == "no queue q"
    assert c["ScalerReady"]["status"] == "Unknown"


def test_transition_time_moves_only_with_the_status():
    first = status(Observation(1, OK, OK, OK), None, "t1")
    second = status(Observation(1, OK, OK, Check(False, "NotReady")), first, "t2")
    c = _conditions(second)
    assert c["QueueReady"]["lastTransitionTime"] == "t1"
    assert c["ScalerReady"]["lastTransitionTime"] == "t2" and c["Ready"]["lastTransitionTime"] == "t2"


def test_counts_not_observed_are_removed_not_kept_stale():
    s = status(Observation(1, OK, OK, OK), None, "t1")
    assert s["queued"] is None and s["running"] is None  # null in a merge patch removes the field
