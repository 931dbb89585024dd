"""The web console at ``/console/``: plain ES modules and CSS from ``static/`` (no build step, no CDN),
served by the API itself with a strict Content-Security-Policy; the page talks to the same ``/v1`` API as
any client, with the key the operator types (docs/console.md)."""
