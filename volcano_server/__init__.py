"""Volcano Locks reference service: the contract in openapi.yaml, served over HTTP.

`create_app(store)` builds the ASGI app; `open_store(url)` picks the backend from a database URL
(`sqlite:///path.db` or `postgresql://...`).  The command line is `volcano-locks` (`cli.py`).
"""

from ._app import create_app
from .storage import Store, open_store

__all__ = ["Store", "__version__", "create_app", "open_store"]

__version__ = "0.1.0"
