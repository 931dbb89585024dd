import uuid
from taskyard_common.store import NewTask

async def test_smoke(store):
    rec = await store.create(NewTask(id=uuid.uuid4(), input={"a": 1}, metadata={"k": "v"}))
    got = await store.get(rec.id)
    assert got == rec
