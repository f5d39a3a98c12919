/* Lanner's tracking script for remote landers that ad traffic reaches directly (no redirect through
   the tracker). Include it on the lander:
     <script src="https://TRACKER/lanner.js" data-campaign="ALIAS" async></script>
   It records the visit as the campaign's click (GET TRACKER/lp/visit: the page's query, document.referrer;
   address and User-Agent from the request), then sets window.lanner.subid, resolves window.lanner.ready
   and points every a[href*="{offer}"] and a[data-lanner-offer] at TRACKER/lp/click?subid=SUBID.
   A page whose URL carries subid= (traffic that came through the campaign URL) records nothing.
   A reload or back/forward of the page reuses the stored subid (this origin's localStorage, for the
   campaign's uniqueness window); no cookie is set. No dependencies. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.lanner) return;
  var tracker = new URL(script.src, location.href).origin;
  var campaign = script.getAttribute("data-campaign") || "";
  var storeKey = "lanner:" + campaign;
  var resolveReady;
  var lanner = (window.lanner = {
    subid: null,
    offerUrl: null,
    clickUrl: null,
    ready: new Promise(function (resolve) { resolveReady = resolve; }),
    onReady: function (callback) { lanner.ready.then(callback); }
  });

  function rewrite() {
    var links = document.querySelectorAll('a[href*="{offer}"], a[href*="%7Boffer%7D"], a[data-lanner-offer]');
    for (var i = 0; i < links.length; i++) links[i].href = lanner.clickUrl;
  }

  function done(subid, offerUrl) {
    lanner.subid = subid || null;
    lanner.offerUrl = offerUrl || null;
    lanner.clickUrl = subid ? tracker + "/lp/click?subid=" + encodeURIComponent(subid) : null;
    if (subid) {
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", rewrite);
      else rewrite();
    }
    resolveReady(lanner);
  }

  function stored() {
    try {
      var saved = JSON.parse(localStorage.getItem(storeKey) || "null");
      if (saved && saved.page === location.href && saved.expires > Date.now()) return saved;
    } catch (e) { /* Storage blocked: ask the tracker, whose debounce covers quick repeats. */ }
    return null;
  }

  function store(data) {
    try {
      localStorage.setItem(storeKey, JSON.stringify({
        subid: data.subid, offerUrl: data.offer_url, page: location.href,
        expires: Date.now() + (data.ttl || 0) * 1000
      }));
    } catch (e) { /* Nothing to keep it in. */ }
  }

  function navigationType() {
    var entries = window.performance && performance.getEntriesByType ? performance.getEntriesByType("navigation") : [];
    return entries.length ? entries[0].type : "navigate";
  }

  function visit() {
    var params = new URLSearchParams(location.search);
    params.set("campaign", campaign);
    params.set("referrer", document.referrer);
    fetch(tracker + "/lp/visit?" + params.toString(), { credentials: "omit", cache: "no-store" })
      .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
      .then(function (data) { store(data); done(data.subid, data.offer_url); })
      .catch(function () { done(null, null); });
  }

  var given = new URLSearchParams(location.search).get("subid");
  if (given) return done(given, null);
  var saved = stored();
  if (saved && navigationType() !== "navigate") return done(saved.subid, saved.offerUrl);
  if (document.prerendering) document.addEventListener("prerenderingchange", visit, { once: true });
  else visit();
})();
