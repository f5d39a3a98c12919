"""The sandbox a local lander's pages run in: one policy for the app's `/landers/` sink
(routes/landers.py) and nginx's `location /landers/` (workers/ops/nginx.py renders it in).

A local lander is served from the tracker's own origin, where the panel lives, and its files are
untrusted: `sandbox` without `allow-same-origin` puts every page in an opaque origin, so its script
runs but cannot read the panel or the API with the session of the buyer looking at it.
"""

SANDBOX = (
    "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox "
    "allow-top-navigation allow-top-navigation-by-user-activation"
)
