"""Local fakes of the traffic sources' reporting APIs spend is pulled from, each enforcing its contract.

One ThreadingHTTPServer on 127.0.0.1:0 answers Meta's ad insights, TikTok's reporting and PropellerAds'
advertiser statistics, from the rows a test gives it (`rows[platform]`, as the platform prints them), and
PropellerAds' excluded zones of the campaigns a test gives it (`excluded[campaign id]`, read and set). It
checks what the platform checks (the docs are cited at each handler), pages as the platform pages, and
answers errors in the platform's shape. `script` queues answers for the next requests (a 500, a 429 with
Retry-After, garbage, a hang) before the platform's own handling resumes.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from platform_fakes import Scripted

META_SPEND_TOKEN = "EAAB-insights-token-0123456789"
META_ACCOUNT = "1122334455"
TIKTOK_SPEND_TOKEN = "tt-report-token-abcdef123456"
TIKTOK_ADVERTISER = "7012345678901234567"
PROPELLER_TOKEN = "propeller-api-token-0123456789"
DAY = re.compile(r"\d{4}-\d\d-\d\d")


class SpendFake:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[str, list[dict]] = {"meta": [], "tiktok": [], "propellerads": []}
        self.queued: list[Scripted] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.excluded: dict[str, list[int]] = {}  # PropellerAds campaign id -> its excluded zones.
        self.puts: list[tuple[str, list[int]]] = []  # (campaign id, the list) of each accepted PUT.
        # Meta's report jobs: report_run_id -> [the looks left before it completes, its rows, its end].
        self.jobs: dict[str, list] = {}
        self.job_looks = 2  # A job answers "Job Running" this many times, then its end.
        self.job_end = "Job Completed"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.answer("GET")

            def do_PUT(self) -> None:
                self.answer("PUT")

            def do_POST(self) -> None:
                self.answer("POST")

            def answer(self, method: str) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                length = int(headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with owner.lock:
                    owner.paths.append(f"{method} {self.path}" if method != "GET" else self.path)
                    owner.headers.append(headers)
                    scripted = owner.queued.pop(0) if owner.queued else None
                if scripted is not None:
                    if scripted.hang:
                        time.sleep(scripted.hang)
                    code, payload, extra = scripted.code, scripted.body, scripted.headers
                else:
                    url = urllib.parse.urlsplit(self.path)
                    query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
                    if method == "GET":
                        code, answer = owner.handle(url.path, query, headers)
                    elif method == "POST":
                        form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
                        code, answer = owner.meta_job(url.path, query, form, headers)
                    else:
                        code, answer = owner.exclusion(method, url.path, headers, body)
                    payload, extra = json.dumps(answer).encode(), {}
                try:
                    self.send_response(code)
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # The client gave up waiting (a slow-platform test).

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def script(self, *answers: Scripted) -> None:
        with self.lock:
            self.queued.extend(answers)

    def reset(self) -> None:
        with self.lock:
            self.rows = {"meta": [], "tiktok": [], "propellerads": []}
            self.queued.clear()
            self.paths.clear()
            self.headers.clear()
            self.excluded.clear()
            self.puts.clear()
            self.jobs.clear()
            self.job_looks, self.job_end = 2, "Job Completed"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)

    def handle(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> tuple[int, object]:
        if path.startswith("/open_api/"):
            return self.tiktok(path, query, headers)
        if path.startswith("/v5/adv/campaigns/"):
            return self.exclusion("GET", path, headers, b"")
        if path.startswith("/v5/"):
            return self.propellerads(path, query, headers)
        return self.meta(path, query, headers)

    # https://developers.facebook.com/docs/marketing-api/insights/ and
    # https://developers.facebook.com/docs/marketing-api/reference/ad-account/insights/ (fields, level,
    # time_increment, time_range); https://developers.facebook.com/docs/graph-api/results (cursor paging:
    # `after`, `paging.next` only while a next page exists); .../graph-api/guides/error-handling (shape).
    @staticmethod
    def meta_error(message: str, code: int = 100, status: int = 400) -> tuple[int, object]:
        return status, {
            "error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "Ab"}
        }

    # Report jobs: https://developers.facebook.com/docs/marketing-api/insights/best-practices/ (async
    # /insights); the job's fields (async_status, async_percent_completion) and its /insights edge as Meta's
    # own SDK has them (facebook-nodejs-business-sdk src/objects/ad-report-run.js); a POST of the insights
    # parameters answers {"report_run_id"}; the job answers "Job Running" `job_looks` times, then `job_end`.
    def meta_job(
        self, path: str, query: dict[str, list[str]], form: dict[str, list[str]], headers: dict[str, str]
    ) -> tuple[int, object]:
        if "access_token" in query or "access_token" in form:
            return self.meta_error("The test expects the token in the Authorization header, never sent.")
        if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return self.meta_error("The test expects the job's parameters as a form.")
        answer = self.meta(path, form, headers, whole=True)
        if answer[0] != 200:
            return answer
        with self.lock:
            run_id = str(900_000 + len(self.jobs) + 1)
            self.jobs[run_id] = [self.job_looks, answer[1], self.job_end]
        return 200, {"report_run_id": run_id}

    def meta_run(self, run_id: str, rest: str, query: dict[str, list[str]]) -> tuple[int, object]:
        with self.lock:
            job = self.jobs.get(run_id)
            if job is None:
                return self.meta_error(f"Unsupported get request. Object with ID '{run_id}' does not exist")
            if not rest:
                if job[0] > 0:
                    job[0] -= 1
                    return 200, {"id": run_id, "async_status": "Job Running", "async_percent_completion": 50}
                return 200, {"id": run_id, "async_status": job[2], "async_percent_completion": 100}
            if job[0] > 0 or job[2] != "Job Completed":
                return self.meta_error("(#100) The report is not ready; ask for it once it is completed.")
            rows = job[1]
        one = {key: values[-1] for key, values in query.items()}
        return 200, self.meta_page(rows, one, f"https://graph.facebook.com/v21.0/{run_id}/insights?after=...")

    def meta(
        self, path: str, query: dict[str, list[str]], headers: dict[str, str], whole: bool = False
    ) -> tuple[int, object]:
        error = self.meta_error
        if headers.get("authorization") != f"Bearer {META_SPEND_TOKEN}":
            return error("Invalid OAuth access token - Cannot parse access token", 190)
        job = re.fullmatch(r"/v\d+\.\d+/(\d+)(/insights)?", path)
        if job and not whole:
            return self.meta_run(job.group(1), job.group(2) or "", query)
        match = re.fullmatch(r"/v\d+\.\d+/act_(\d+)/insights", path)
        if not match:
            return error("Unknown path components", 2500)
        if "access_token" in query:
            return error("The test expects the token in the Authorization header, never in the URL.")
        if match.group(1) != META_ACCOUNT:
            return error(
                f"Unsupported get request. Object with ID 'act_{match.group(1)}' does not exist", 100
            )
        one = {key: values[-1] for key, values in query.items()}
        if one.get("level") not in ("account", "campaign", "adset", "ad"):
            return error("(#100) level must be one of account, campaign, adset, ad")
        if one.get("time_increment") != "1":
            return error("The test expects time_increment=1 (a row a day).")
        fields = set(one.get("fields", "").split(","))
        needed = {"spend", "campaign_id", "date_start", "account_currency"}
        needed |= {"adset_id"} | ({"ad_id"} if one["level"] == "ad" else set())
        if not needed <= fields:
            return error(f"The test expects the fields {', '.join(sorted(needed))}.")
        try:
            period = json.loads(one.get("time_range", ""))
            since, until = period["since"], period["until"]
            assert DAY.fullmatch(since) and DAY.fullmatch(until) and since <= until
        except (ValueError, KeyError, TypeError, AssertionError):
            return error("(#100) time_range must be {'since':'YYYY-MM-DD','until':'YYYY-MM-DD'}")
        rows = [
            {k: v for k, v in row.items() if k in fields or k in ("date_start", "date_stop")}
            for row in self.rows["meta"]
            if since <= row["date_start"] <= until and (one["level"] == "ad" or "ad_id" not in fields)
        ]
        if whole:
            return 200, rows
        return 200, self.meta_page(
            rows, one, f"https://graph.facebook.com/v21.0/act_{META_ACCOUNT}/insights?after=..."
        )

    @staticmethod
    def meta_page(rows: list[dict], one: dict[str, str], next_url: str) -> dict:
        """A page of `rows` as the Graph API pages them: `limit`, the `after` cursor, `next` while more."""
        limit = int(one.get("limit", "25"))
        offset = int(base64.b64decode(one["after"]).decode()) if one.get("after") else 0
        page = rows[offset : offset + limit]
        paging: dict = {}
        if page:
            paging["cursors"] = {
                "before": base64.b64encode(str(offset).encode()).decode(),
                "after": base64.b64encode(str(offset + len(page)).encode()).decode(),
            }
        if offset + limit < len(rows):
            paging["next"] = next_url
        return {"data": page, "paging": paging}

    # https://business-api.tiktok.com/portal/docs?id=1740302848100353 (synchronous report: report_type,
    # data_level, dimensions, metrics, start_date/end_date, page, page_size ≤ 1000; HTTP 200 with a
    # non-zero `code` for every error).
    def tiktok(self, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> tuple[int, object]:
        def error(code: int, message: str) -> tuple[int, object]:
            return 200, {"code": code, "message": message, "request_id": "req-1", "data": {}}

        if path != "/open_api/v1.3/report/integrated/get/":
            return 404, {"code": 40400, "message": "Not found"}
        if headers.get("access-token") != TIKTOK_SPEND_TOKEN:
            return error(40105, "The access token is invalid or has been revoked.")
        one = {key: values[-1] for key, values in query.items()}
        if one.get("advertiser_id") != TIKTOK_ADVERTISER:
            return error(40002, "advertiser_id: no permission for this advertiser.")
        if one.get("report_type") != "BASIC" or one.get("data_level") not in (
            "AUCTION_AD",
            "AUCTION_ADGROUP",
        ):
            return error(40002, "report_type / data_level: invalid value.")
        try:
            dimensions, metrics = json.loads(one["dimensions"]), json.loads(one["metrics"])
            page, size = int(one.get("page", "1")), int(one.get("page_size", "10"))
            since, until = one["start_date"], one["end_date"]
        except (KeyError, ValueError):
            return error(40002, "dimensions, metrics, start_date and end_date are required.")
        if "stat_time_day" not in dimensions or "spend" not in metrics or not 1 <= size <= 1000 or page < 1:
            return error(40002, "dimensions need stat_time_day, metrics spend; page_size is 1 to 1000.")
        rows = [r for r in self.rows["tiktok"] if since <= r["dimensions"]["stat_time_day"][:10] <= until]
        total_pages = max(1, -(-len(rows) // size))
        listed = [
            {
                "dimensions": r["dimensions"],
                "metrics": {k: v for k, v in r["metrics"].items() if k in metrics},
            }
            for r in rows[(page - 1) * size : page * size]
        ]
        info = {"page": page, "page_size": size, "total_number": len(rows), "total_page": total_pages}
        return 200, {
            "code": 0,
            "message": "OK",
            "request_id": "req-1",
            "data": {"list": listed, "page_info": info},
        }

    # PropellerAds' own documentation (https://ssp-api.propellerads.com/v5/docs/, a Swagger page) is in no
    # stored source; this follows the only citable material, third-party (docs/platforms.md, "The
    # PropellerAds contract"): the server, Bearer token and /adv/statistics path from PropellerAds' OpenAPI
    # file's top as copied in github.com/pavelraiden/propellerads-api-encyclopedia data/api_specs.yaml;
    # GET with group_by[] (date_time, campaign_id, ...), day_from / day_to "YYYY-MM-DD hh:mm:ss", answered
    # {"items": [...]} with rows keyed date_time and `spent`, from a script using it; `spent` summed by a
    # Chrome extension too. The refusals' bodies (401 {"message"}, 422 {"errors"}) are not from any source:
    # the client only says the status and any "message".
    def propellerads(
        self, path: str, query: dict[str, list[str]], headers: dict[str, str]
    ) -> tuple[int, object]:
        if path != "/v5/adv/statistics":
            return 404, {"message": "Not Found"}
        if headers.get("authorization") != f"Bearer {PROPELLER_TOKEN}":
            return 401, {"message": "Unauthenticated."}
        group_by = query.get("group_by[]", [])
        stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
        day_from, day_to = query.get("day_from", [""])[-1], query.get("day_to", [""])[-1]
        if not {"date_time", "campaign_id", "zone_id"} <= set(group_by):
            return 422, {
                "message": "The given data was invalid.",
                "errors": {"group_by": ["date_time, campaign_id, zone_id"]},
            }
        if not stamp.fullmatch(day_from) or not stamp.fullmatch(day_to):
            return 422, {"message": "The given data was invalid.", "errors": {"day_from": ["Y-m-d H:i:s"]}}
        rows = self.rows["propellerads"]
        return 200, {"items": [r for r in rows if day_from[:10] <= r["date_time"][:10] <= day_to[:10]]}

    # The path /adv/campaigns/{campaignId}/targeting/exclude/zone is in PropellerAds' OpenAPI file's list of
    # paths (data/api_specs.yaml above), and GET of it is used by the same repository's
    # docs/api-reference.md; its bodies (GET's {"zone": [ids]}, PUT's {"zone": [ids]} replacing the list,
    # {"result": true}) and refusals are in no stored source: they are this fake's assumption, unverified.
    def exclusion(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, object]:
        match = re.fullmatch(r"/v5/adv/campaigns/(\d+)/targeting/exclude/zone", path)
        if match is None:
            return 404, {"message": "Not Found"}
        if headers.get("authorization") != f"Bearer {PROPELLER_TOKEN}":
            return 401, {"message": "Unauthenticated."}
        campaign = match.group(1)
        with self.lock:
            if campaign not in self.excluded:
                return 404, {"message": f"Campaign {campaign} not found."}
            if method == "GET":
                return 200, {"zone": list(self.excluded[campaign])}
        if not headers.get("content-type", "").startswith("application/json"):
            return 415, {"message": "The request body must be application/json."}
        try:
            given = json.loads(body)
        except ValueError:
            return 400, {"message": "The request body is not JSON."}
        zones = given.get("zone") if isinstance(given, dict) else None
        if (
            not isinstance(zones, list)
            or set(given) != {"zone"}
            or not all(type(z) is int and z > 0 for z in zones)
            or len(set(zones)) != len(zones)
        ):
            return 422, {
                "message": "The given data was invalid.",
                "errors": {"zone": ["zone must be a list of distinct zone ids (integers)."]},
            }
        with self.lock:
            self.excluded[campaign] = list(zones)
            self.puts.append((campaign, list(zones)))
        return 200, {"result": True}
