"""No figure touches torch's global random state.

The lesson's "seeded" figures (the untrained block of chapters 1 and 14, the learned tables, the
mistakes' models) draw their weights from generators of their own (:func:`posenc.model.local_random`),
so the explorer's threads can serve them at once and every load shows the same numbers. Three checks:

- every figure, knowledge check and chapter's numbers, computed under a dispatch mode that refuses any
  random draw from the global generator, draws none;
- every figure and workbench request fired concurrently at the real app, while another thread reseeds
  and consumes the global generator, returns the bytes of a sequential run;
- a sequential run of every request leaves the global generator's state as it found it.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.testclient import TestClient
from torch.utils._python_dispatch import TorchDispatchMode

from posenc.teaching.explorer.app import create_app
from posenc.teaching.explorer.routers import lesson as lesson_router
from posenc.teaching.explorer.routers import workbench
from posenc.teaching.lesson import chapters
from posenc.teaching.lesson.manifest import CHAPTERS

MODULES = [chapters.MODULES[c.id] for c in CHAPTERS]
CHECKS = [check for module in MODULES for check in getattr(module, "CHECKS", ())]


class GlobalDrawRefused(RuntimeError):
    pass


class RefuseGlobalDraws(TorchDispatchMode):
    """Raises on any operation that would draw from torch's global generator: a random operation
    given no generator, on a tensor that holds data (meta tensors draw nothing), with a nonzero
    dropout probability where the operation has one."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in func.tags and kwargs.get("generator") is None:
            tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            on_meta = (tensors and all(t.is_meta for t in tensors)) or str(kwargs.get("device")) == "meta"
            dropout = [
                args[i] if i < len(args) else kwargs.get(a.name, a.default_value)
                for i, a in enumerate(func._schema.arguments)
                if a.name == "dropout_p"
            ]
            if not on_meta and dropout != [0.0]:
                raise GlobalDrawRefused(f"{func} draws from torch's global generator")
        return func(*args, **kwargs)


def _figure_call(figure):
    values = figure.defaults()
    values.update({p.name: None for p in figure.parameters if p.kind == "lab_run"})
    return lambda: figure.function(**values)


def test_the_refusing_mode_refuses_a_global_draw():
    # the guard of the two tests below catches what it is meant to catch
    with pytest.raises(GlobalDrawRefused):
        with RefuseGlobalDraws():
            torch.nn.Linear(4, 4)
    with RefuseGlobalDraws():
        torch.randn(3, generator=torch.Generator().manual_seed(0))
        torch.nn.Linear(4, 4, device="meta")


@pytest.mark.parametrize("route", list(chapters.FIGURES))
def test_no_figure_draws_from_the_global_generator(route):
    with RefuseGlobalDraws():
        _figure_call(chapters.FIGURES[route])()


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_no_knowledge_check_draws_from_the_global_generator(check):
    with RefuseGlobalDraws():
        check.evidence()


@pytest.mark.slow
@pytest.mark.parametrize("chapter", [c.id for c in CHAPTERS])
def test_no_chapter_number_draws_from_the_global_generator(chapter):
    with RefuseGlobalDraws():
        chapters.MODULES[chapter].numbers()


# -- the real app, concurrently ------------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), base_url="http://127.0.0.1")


def _requests(client) -> list[str]:
    """Every lesson figure route and every workbench route that needs no parameter, with their
    defaults, and every knowledge check's answer (whose evidence is computed per request)."""
    paths = [f"/api/lesson/{route}" for route in chapters.FIGURES]
    for router in (workbench.router, lesson_router.router):
        for route in router.routes:
            path = getattr(route, "path", "")
            needs = [q for q in route.dependant.query_params if q.field_info.is_required()]
            if "{" not in path and not needs and path not in paths:
                paths.append(path)
    ids = [c["id"] for c in client.get("/api/quiz").json()["checks"]]
    assert ids, "the quiz lists no checks"
    paths += [f"/api/quiz/{i}/answer?choice=0" for i in ids]
    return paths


def _fetch(client, path: str) -> bytes:
    response = client.get(path)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:300]}"
    return response.content


def test_concurrent_requests_return_the_bytes_of_a_sequential_run(client):
    paths = _requests(client)
    assert {"/api/lesson/bag", "/api/lesson/big-picture", "/api/lesson/attention", "/api/lesson/learned"} <= set(paths)
    sequential = {path: _fetch(client, path) for path in paths}

    stop = threading.Event()

    def reseed_and_draw():  # another user of torch's global generator, busy all the while
        seed = 1
        while not stop.is_set():
            torch.manual_seed(seed)
            torch.randn(256)
            seed += 1

    order = paths * 3
    random.Random(0).shuffle(order)
    noise = threading.Thread(target=reseed_and_draw, daemon=True)
    noise.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            concurrent = list(pool.map(lambda path: (path, _fetch(client, path)), order))
    finally:
        stop.set()
        noise.join()
    differing = sorted({path for path, body in concurrent if body != sequential[path]})
    assert not differing, f"these requests answered differently under concurrency: {differing}"


def test_requests_leave_the_global_random_state_alone(client):
    paths = _requests(client)
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    for path in paths:
        _fetch(client, path)
    assert torch.equal(torch.get_rng_state(), before)
