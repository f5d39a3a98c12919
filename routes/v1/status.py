"""`lanner status` as JSON: processes, consumer, spool, queue, database, geo, deferred steps, postbacks."""

from __future__ import annotations

import falcon

from routes.v1.spec import Operation, answer, api_resource


@api_resource
class StatusResource:
    operations = {"GET": Operation("What `lanner status --json` shows.")}

    def __init__(self, auth, db, settings) -> None:
        self.auth, self.db, self.settings = auth, db, settings

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        from workers.ops.status import collect_status

        if req.context.principal.role != "admin":
            raise falcon.HTTPForbidden(title="Admins only", description="The install's status is for admins.")
        answer(req, resp, collect_status(self.settings, self.db))
