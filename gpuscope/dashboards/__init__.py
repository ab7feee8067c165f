"""The Dash web dashboard over the run store: ``create_app(store)``; served by ``gpuscope dashboard``."""

from gpuscope.dashboards.app import create_app

__all__ = ["create_app"]
