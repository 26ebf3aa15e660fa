"""The explorer's app in process, as the API tests ask it (FastAPI's ``TestClient``; no server, no
browser). The module-scoped ``client`` fixture built on it is in ``conftest.py``."""

from __future__ import annotations


def get(client, url: str, **params):
    """``GET url?params`` answered with status 200; its JSON body."""
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()
