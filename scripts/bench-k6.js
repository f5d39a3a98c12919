// One step of `lanner bench clicks`: a constant arrival rate of campaign-URL clicks for a fixed time.
//
// Run by workers/bench.py (run_k6_step), which passes everything through -e BENCH_*:
//   BENCH_URL            the campaign URL, e.g. http://127.0.0.1:PORT/bench
//   BENCH_RATE           iterations (= requests) started per second
//   BENCH_SECONDS        step duration
//   BENCH_PRE_VUS        preAllocatedVUs
//   BENCH_MAX_VUS        maxVUs
//   BENCH_TIMEOUT        per-request timeout, e.g. 5s
//   BENCH_GRACEFUL_STOP  how long in-flight requests may finish after the step, e.g. 6s
//   BENCH_SUMMARY        path of the JSON summary this script writes (handleSummary)
//   BENCH_SALT           a random 24-bit integer; makes each step's visitor IPs differ
//   BENCH_REPEAT         percent of iterations that are a returning visitor (0 = every visitor new)
//   BENCH_MODE           unique (default), repeat (50 fixed IP/UA pairs), nat (30% from 5
//                        carrier IPs, each request with its own UA) or lander (a new visitor per
//                        funnel: the click, then its LP click /lp/click?subid=..., whose 302 must
//                        name the same subid; an iteration is a funnel and logs its subid once)
//
// In repeat mode a visitor comes back within the tracker's debounce window and rightly gets the
// same subid again, so each log line there is `SUBID<TAB>VISITOR` and the bench counts a subid
// given to two different visitors as the duplicate.
//
// Every 302 whose Location carries `click=<subid>` logs the bare subid with console.log; the bench
// runs k6 with --log-output=file=PATH --log-format=raw, so the file holds one subid per line to be
// reconciled with the click table (k6's own warnings land there too and are filtered out by shape).
// Redirects are never followed: the 302 is the answer being measured.

import http from 'k6/http';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';

const URL = __ENV.BENCH_URL;
const ORIGIN = URL.slice(0, URL.indexOf('/', URL.indexOf('//') + 2));
const RATE = parseInt(__ENV.BENCH_RATE, 10);
const SECONDS = parseInt(__ENV.BENCH_SECONDS, 10);
const SALT = parseInt(__ENV.BENCH_SALT || '0', 10) & 0xffffff;
const REPEAT = parseInt(__ENV.BENCH_REPEAT || '0', 10) / 100;
const MODE = __ENV.BENCH_MODE || 'unique';
const FIXED_VISITORS = 50;
const NAT_SHARE = 0.3;
const NAT_IPS = ['100.64.0.1', '100.64.7.9', '198.18.3.4', '203.0.113.77', '192.0.2.200'];
// A returning visitor comes back after the tracker's 2 s debounce, so each of its clicks is a new
// click with its own subid (a repeat within 2 s would rightly get the same one). The 3 s count from
// the answer to its last click, not from its sending: under overload a click may wait seconds in a
// queue, and its return 3 s after sending could reach the tracker within 2 s of it. A visitor
// whose click got no answer (a timeout: the tracker may still take it later) does not come back.
const RETURN_AFTER_MS = 3000;
const returning = []; // Per VU: [{ip, ua, at}], oldest first.

export const options = {
  discardResponseBodies: true,
  maxRedirects: 0,
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'p(99)', 'max'],
  scenarios: {
    step: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: `${SECONDS}s`,
      preAllocatedVUs: parseInt(__ENV.BENCH_PRE_VUS, 10),
      maxVUs: parseInt(__ENV.BENCH_MAX_VUS, 10),
      gracefulStop: __ENV.BENCH_GRACEFUL_STOP || '6s',
    },
  },
  // Always-true thresholds only to get these sub-metrics into the summary.
  thresholds: {
    'bench_errors{kind:network}': ['count>=0'],
    'bench_errors{kind:4xx}': ['count>=0'],
    'bench_errors{kind:5xx}': ['count>=0'],
    'bench_errors{kind:other}': ['count>=0'],
    'bench_errors{code:500}': ['count>=0'],
    'bench_errors{code:502}': ['count>=0'],
    'bench_errors{code:503}': ['count>=0'],
    'bench_errors{code:504}': ['count>=0'],
  },
};

const accepted = new Counter('bench_accepted');
const errors = new Counter('bench_errors');

// First octets of /8s that are entirely public unicast (no RFC 1918, CGNAT, loopback, link-local,
// documentation or multicast ranges inside them).
const PUBLIC_FIRST_OCTETS = [
  2, 5, 8, 12, 13, 17, 18, 20, 23, 24, 31, 34, 35, 37, 39, 41, 43, 45, 46, 47, 49, 51, 52, 54, 58, 59, 60,
  61, 62, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90,
  91, 92, 93, 94, 95, 96, 97, 98, 99, 101, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115,
  116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 134, 136, 138, 139, 140, 141, 142, 143, 144, 145, 146,
  147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167,
  168, 170, 171, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190,
  191, 193, 194, 195, 196, 197, 199, 200, 201, 202, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214,
  215, 216, 217, 218, 219, 220, 221, 222,
];

const USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.5 Safari/605.1.15',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.5 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:140.0) Gecko/20100101 Firefox/140.0',
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Safari/537.36',
];

// A bijection on 24 bits (add, odd multiply, xorshift), so iteration n of a step gets host bits no
// other iteration of that step gets: visitor IPs are unique within a step and look random.
function hostBits(n) {
  let x = (n + SALT) & 0xffffff;
  x = Math.imul(x, 0x9e3779) & 0xffffff | 0; // 0x9e3779 is odd.
  x ^= x >>> 12;
  x = Math.imul(x, 0x5bd1e5) & 0xffffff; // 0x5bd1e5 is odd.
  x ^= x >>> 11;
  return x;
}

function visitorIp(n) {
  const host = hostBits(n);
  const first = PUBLIC_FIRST_OCTETS[Math.floor(Math.random() * PUBLIC_FIRST_OCTETS.length)];
  return `${first}.${host >>> 16}.${(host >>> 8) & 0xff}.${host & 0xff}`;
}

function userAgent() {
  const base = USER_AGENTS[Math.floor(Math.random() * USER_AGENTS.length)];
  return `${base} lb/${Math.floor(Math.random() * 0x7fffffff).toString(36)}`;
}

let fixed = null;

function fixedVisitor() {
  if (fixed === null) {
    // The same 50 visitors in every VU of the step (SALT, not Math.random, decides them).
    fixed = [];
    for (let i = 0; i < FIXED_VISITORS; i++) {
      const host = hostBits(i);
      const ip = `${PUBLIC_FIRST_OCTETS[host % PUBLIC_FIRST_OCTETS.length]}.${host >>> 16}.${(host >>> 8) & 0xff}.${host & 0xff}`;
      fixed.push({ ip, ua: `${USER_AGENTS[i % USER_AGENTS.length]} lb/fixed${SALT}-${i}`, key: `f${i}` });
    }
  }
  return fixed[Math.floor(Math.random() * FIXED_VISITORS)];
}

function visitor() {
  if (MODE === 'repeat') return fixedVisitor();
  if (MODE === 'nat' && Math.random() < NAT_SHARE) {
    return { ip: NAT_IPS[Math.floor(Math.random() * NAT_IPS.length)], ua: userAgent() };
  }
  const now = Date.now();
  if (REPEAT > 0 && returning.length && returning[0].at < now - RETURN_AFTER_MS && Math.random() < REPEAT) {
    const back = returning.shift();
    back.at = now;
    returning.push(back);
    return back;
  }
  const fresh = { ip: visitorIp(exec.scenario.iterationInTest), ua: userAgent(), at: now };
  if (REPEAT > 0) {
    returning.push(fresh);
    if (returning.length > 50) returning.shift();
  }
  return fresh;
}

function forget(who) {
  const at = returning.indexOf(who);
  if (at >= 0) returning.splice(at, 1);
}

export default function () {
  const who = visitor();
  const res = http.get(URL, {
    headers: { 'X-Real-IP': who.ip, 'User-Agent': who.ua },
    redirects: 0,
    timeout: __ENV.BENCH_TIMEOUT || '5s',
  });
  if (REPEAT > 0 && who.at !== undefined) {
    if (res.status === 0) forget(who);
    else who.at = Date.now();
  }
  let answer = res;
  if (res.status === 302) {
    const location = res.headers.Location || '';
    const at = location.indexOf('click=');
    if (at >= 0) {
      const end = location.indexOf('&', at);
      const subid = location.slice(at + 6, end < 0 ? undefined : end);
      if (MODE === 'lander') {
        // The visitor clicks through the lander: the LP click picks the offer and records it.
        answer = http.get(`${ORIGIN}/lp/click?subid=${subid}`, {
          headers: { 'X-Real-IP': who.ip, 'User-Agent': who.ua },
          redirects: 0,
          timeout: __ENV.BENCH_TIMEOUT || '5s',
        });
        if (answer.status === 302 && (answer.headers.Location || '').indexOf(`click=${subid}`) >= 0) {
          console.log(subid);
          accepted.add(1);
          return;
        }
      } else {
        console.log(who.key ? `${subid}\t${who.key}` : subid);
        accepted.add(1);
        return;
      }
    }
  }
  let kind = 'other';
  if (answer.status === 0) kind = 'network';
  else if (answer.status >= 500) kind = '5xx';
  else if (answer.status >= 400) kind = '4xx';
  errors.add(1, { kind, code: String(answer.status) });
}

export function handleSummary(data) {
  return { [__ENV.BENCH_SUMMARY]: JSON.stringify(data) };
}
