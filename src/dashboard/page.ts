/**
 * The dashboard's page: one HTML document with its style and script inline — no CDN, no build step,
 * nothing fetched but the page's own stream and JSON, so it works offline. Charts are SVG drawn by
 * the script. The handler puts the feed's last frame and history where `BOOT_MARK` stands (a JSON
 * script element, `#boot`), so the script draws real values as the page loads, before its stream is
 * open. It reads `events` (server-sent events) relative to its own URL and reconnects by itself; a
 * `token` in the page's query is passed on. It marks its steps for whoever measures it
 * (`performance.getEntriesByName`): `bulwark-embedded-data` (drawn from the embedded data),
 * `bulwark-stream-open`, `bulwark-first-tick` (the stream's first frame), `bulwark-first-data` (the
 * first values in the document).
 */

/** BOOT_MARK is where the handler puts the page's embedded data (`<script type="application/json" id="boot">…</script>`). */
export const BOOT_MARK = '<!--boot-->';

export const PAGE = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bulwark</title>
<link rel="icon" href="data:,">
<style>
:root{--bg:#f7f7f5;--fg:#1d1f21;--mute:#5c6166;--line:#d9d9d4;--card:#fff;--ok:#1a7f37;--warn:#9a6700;--bad:#c62828;--off:#6e7781;--a:#0969da}
*{box-sizing:border-box}
/* What the browser scrolls into view (a focused field) lands below the sticky header, not under it. */
html{scroll-padding-top:80px}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
header{display:flex;flex-wrap:wrap;align-items:center;gap:8px 16px;padding:10px 16px;background:var(--card);border-bottom:1px solid var(--line);position:sticky;top:0;z-index:1}
h1{font-size:17px;margin:0}
h2{font-size:15px;margin:0 0 8px}
main{padding:12px 16px;display:grid;grid-template-columns:minmax(0,1fr);gap:12px}
.charts{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:10px 12px;min-width:0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:12px}
.grid.one{grid-template-columns:1fr}
td .ctl{white-space:normal}
svg{display:block;width:100%;height:150px}
.legend{display:flex;flex-wrap:wrap;gap:2px 10px;font-size:12px;color:var(--mute);margin-top:4px}
.legend i{display:inline-block;width:16px;height:3px;margin-right:4px;vertical-align:middle}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:3px 5px;border-bottom:1px solid var(--line);vertical-align:top}
td{overflow-wrap:break-word}
th{color:var(--mute);font-weight:600;vertical-align:bottom}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.n{white-space:nowrap}
.st{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;white-space:nowrap;max-width:100%}
.ok{background:var(--ok)}.warn{background:var(--warn)}.bad{background:var(--bad)}.off{background:var(--off)}
.mute{color:var(--mute)}
.conn{font-size:13px}
tr.inst{cursor:pointer}
tr.inst:hover{background:#f0f3f6}
.detail>td{white-space:normal;background:#fafafa}
.empty{color:var(--mute);font-style:italic}
button{font:inherit;font-size:12px;padding:1px 8px;border:1px solid #8c959f;border-radius:4px;background:#f6f8fa;cursor:pointer}
input{font:inherit;font-size:12px;width:7em;padding:1px 4px}
input.wide{width:16em}
.err{color:var(--bad);font-size:12px;white-space:normal}
.done{color:var(--ok);font-size:12px}
#actions h2 .mute{font-weight:400}
#actions td{white-space:normal}
#actions button{margin:1px 4px 1px 0;white-space:nowrap}
.ctl{display:inline-flex;flex-wrap:wrap;gap:4px;align-items:center}
label{font-size:12px;color:var(--mute)}
@media (max-width:900px){.charts{grid-template-columns:1fr}.grid{grid-template-columns:1fr}}
@media (max-width:480px){header{padding:8px 10px}main{padding:8px}.card{padding:8px}svg{height:120px}}
/* A phone: a table's rows become blocks — the name on a line of its own, then each value after its column's name. */
@media (max-width:640px){
.scroll table,.scroll tbody,.scroll tr{display:block;width:100%}
.scroll thead{display:none}
.scroll tr{display:flex;flex-wrap:wrap;align-items:baseline;gap:2px 12px;padding:5px 2px;border-bottom:1px solid var(--line)}
.scroll td{display:block;border:0;padding:0;text-align:left;white-space:normal}
.scroll td:first-child{flex:1 1 100%;font-weight:600}
.scroll td:empty{display:none}
.scroll td[data-h]:not([data-h=""])::before{content:attr(data-h) " ";color:var(--mute);font-size:12px}
.scroll td[colspan]{flex:1 1 100%;font-weight:400}
.st{white-space:normal}
.detail>td{padding:4px 0}
}
</style>
</head>
<body>
<header>
<h1 id="title">bulwark</h1>
<span id="mode" class="mute"></span>
<span class="conn"><span id="conn" class="st off">connecting</span> <span id="age" class="mute"></span></span>
</header>
<main>
<section class="charts">
<div class="card"><h2>Calls <span class="mute">(calls/s)</span></h2><svg id="c-calls" role="img" aria-label="calls per second"></svg><div class="legend" id="l-calls"></div></div>
<div class="card"><h2>Errors and refusals <span class="mute">(calls/s)</span></h2><svg id="c-errors" role="img" aria-label="errors per second"></svg><div class="legend" id="l-errors"></div></div>
<div class="card"><h2>Latency p50 / p99 <span class="mute">(ms, last minute)</span></h2><svg id="c-lat" role="img" aria-label="latency"></svg><div class="legend" id="l-lat"></div></div>
</section>
<section id="actions" class="card" hidden></section>
<section id="body"><p class="empty">waiting for the first data…</p></section>
</main>
<!--boot-->
<script>
(function () {
  'use strict';
  var COLORS = ['#0969da', '#c62828', '#1a7f37', '#8250df', '#9a6700', '#0a7e8c', '#bf3989', '#57606a'];
  var qs = new URLSearchParams(location.search);
  var token = qs.get('token');
  var suffix = token ? '?token=' + encodeURIComponent(token) : '';
  var hello = null, points = [], frame = null, lastAt = 0, es = null, open = {}, notes = {}, typed = {};

  function $(id) { return document.getElementById(id); }
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) { return '&#' + c.charCodeAt(0) + ';'; }); }
  // One formatter per number of decimals: toLocaleString with options builds one per call (~150 µs a call against
  // ~3 µs for a kept one, V8 on a loaded machine), and a draw formats a few hundred numbers.
  var formats = {};
  function num(x, d) {
    if (x == null || !isFinite(x)) return '–';
    d = d == null ? 1 : d;
    return (formats[d] || (formats[d] = new Intl.NumberFormat('en-US', { maximumFractionDigits: d }))).format(Number(x));
  }
  function rate(x) { return num(x, x != null && x < 10 ? 2 : 1) + ' calls/s'; }
  function ms(x) { return x == null ? '– ms' : num(x, x < 10 ? 2 : 0) + ' ms'; }
  function since(x) { return x != null && x >= 10000 ? num(x / 1000, 0) + ' s' : ms(x); }
  function pct(x) { return x == null ? '– %' : num(x * 100, 1) + ' %'; }
  function count(x, unit) { return num(x, 0) + ' ' + unit; }
  function bytes(x) { if (x == null) return '– B'; var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0; while (x >= 1024 && i < 3) { x /= 1024; i++; } return num(x, 1) + ' ' + u[i]; }
  function badge(word, cls) { return '<span class="st ' + cls + '">' + esc(word) + '</span>'; }
  // A cell: a string (text, left), N(s) (a number, right) or N(s, h): a number with its own label on a phone ('' for none).
  function row(cells) { return '<tr>' + cells.map(function (c) { return typeof c === 'object' && c ? '<td class="n"' + (c.h != null ? ' data-h="' + esc(c.h) + '"' : '') + '>' + c.n + '</td>' : '<td>' + c + '</td>'; }).join('') + '</tr>'; }
  function N(s, h) { return { n: s, h: h }; }
  // head: the columns' names, a number's column marked by a leading '#' (its unit is in its name: 'calls', 'ejected').
  // Each cell gets its column's name (data-h), shown before the value when a phone stacks the row.
  function table(head, rows) {
    if (rows.length === 0) return '';
    var names = head.map(function (h) { return h.charAt(0) === '#' ? h.slice(1) : h; });
    return '<div class="scroll"><table><thead><tr>' + head.map(function (h, i) { return '<th' + (h.charAt(0) === '#' ? ' class="n"' : '') + '>' + esc(names[i]) + '</th>'; }).join('') + '</tr></thead><tbody>' + rows.map(function (r) { return labelled(r, names); }).join('') + '</tbody></table></div>';
  }
  // The rows' own cells, not a folded-out row's (it holds tables of its own), nor a cell across columns, nor one labelled already.
  function labelled(r, names) {
    if (r.indexOf('<tr class="detail"') === 0) return r;
    var i = 0;
    return r.replace(/<tr\b|<td\b((?: class="n")?)( data-h| colspan)?/g, function (m, cls, own) {
      if (m === '<tr') { i = 0; return m; }
      var h = names[i++];
      return own || i === 1 || h == null ? m : '<td' + cls + ' data-h="' + esc(h) + '"';
    });
  }
  function card(title, html) { return html ? '<div class="card"><h2>' + esc(title) + '</h2>' + html + '</div>' : ''; }

  // ---- connection ----
  function setConn(word, cls) { var c = $('conn'); c.textContent = word; c.className = 'st ' + cls; }
  function mark(name) { if (performance.getEntriesByName(name).length === 0) performance.mark(name); }
  function onHello(h) { hello = h; if (hello.actions) loadActions(); $('title').textContent = hello.title; document.title = hello.title + ' dashboard'; $('mode').textContent = hello.mode === 'fleet' ? 'fleet view' : 'this process'; }
  function onFrame(f) {
    frame = f; lastAt = Date.now();
    var p = frame.point; if (!points.length || points[points.length - 1].t !== p.t) points.push(p);
    var keep = 300000; while (points.length > 1 && points[0].t < p.t - keep) points.shift();
    render();
    // When the first values were drawn, for whoever measures the page (performance.getEntriesByName).
    mark('bulwark-first-data');
  }
  function connect() {
    var again = es !== null;
    if (es) es.close();
    setConn(again ? 'reconnecting' : 'connecting', 'warn');
    es = new EventSource('events' + suffix);
    es.onopen = function () { mark('bulwark-stream-open'); };
    es.addEventListener('hello', function (e) { onHello(JSON.parse(e.data)); });
    es.addEventListener('history', function (e) { points = JSON.parse(e.data); });
    es.addEventListener('tick', function (e) {
      mark('bulwark-first-tick');
      setConn('live', 'ok'); onFrame(JSON.parse(e.data));
      if (hello && hello.actions && Date.now() - actionsAt > 3000) loadActions();
    });
    es.onerror = function () { setConn('reconnecting', 'warn'); if (es.readyState === 2) setTimeout(connect, 1000); };
  }
  function watch() {
    var tick = hello ? hello.tickMs : 1000;
    if (lastAt) { var s = (Date.now() - lastAt) / 1000; $('age').textContent = 'updated ' + num(s, 0) + ' s ago'; }
    // A stream that went quiet (a proxy holding it, a server that stopped without closing it) is opened again.
    if (lastAt && Date.now() - lastAt > Math.max(5000, 4 * tick)) { setConn('stalled', 'bad'); lastAt = Date.now(); connect(); }
  }

  // ---- charts ----
  function series(key) {
    // key: 0 calls/s, 1 errors/s, 2 p50, 3 p99. Process: one line per component; fleet: one per service.
    var names = {};
    points.forEach(function (p) { for (var k in p.c) names[lineOf(k)] = 1; });
    var out = [];
    Object.keys(names).forEach(function (n) {
      var ys = points.map(function (p) { return valueAt(p, n, key); });
      if (ys.some(function (y) { return y != null && y > 0; })) out.push({ name: n, ys: ys });
    });
    out.sort(function (a, b) { return peak(b.ys) - peak(a.ys); });
    return out.slice(0, 6);
  }
  function peak(ys) { var m = 0; ys.forEach(function (y) { if (y != null && y > m) m = y; }); return m; }
  function lineOf(k) { return hello && hello.mode === 'fleet' ? k.split('/')[0] : k; }
  function valueAt(p, line, key) {
    if (!(hello && hello.mode === 'fleet')) { var v = p.c[line]; return v ? v[key] : null; }
    var sum = null;
    for (var k in p.c) {
      if (lineOf(k) !== line) continue; var x = p.c[k][key]; if (x == null) continue;
      sum = sum == null ? x : key >= 2 ? Math.max(sum, x) : sum + x;
    }
    return sum;
  }
  function chart(id, legendId, lines, unit) {
    var svg = $(id), W = 400, H = 150, L = 44, B = 18, T = 6;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('preserveAspectRatio', 'none');
    var max = 0; lines.forEach(function (s) { max = Math.max(max, peak(s.ys)); });
    if (max <= 0) max = 1;
    var mag = Math.pow(10, Math.floor(Math.log10(max))); max = Math.ceil(max / mag) * mag;
    var n = points.length, t0 = n ? points[0].t : 0, t1 = n ? points[n - 1].t : 1, span = Math.max(t1 - t0, 1);
    var g = '';
    for (var i = 0; i <= 2; i++) {
      var y = T + (H - B - T) * i / 2, v = max * (1 - i / 2);
      g += '<line x1="' + L + '" x2="' + W + '" y1="' + y + '" y2="' + y + '" stroke="#e3e3de" stroke-width="1" vector-effect="non-scaling-stroke"/>';
      g += '<text x="' + (L - 4) + '" y="' + (y + 4) + '" font-size="10" text-anchor="end" fill="#5c6166">' + num(v, v < 10 ? 1 : 0) + '</text>';
    }
    g += '<text x="' + L + '" y="' + (H - 4) + '" font-size="10" fill="#5c6166">' + num(span / 60000, 1) + ' min ago</text><text x="' + W + '" y="' + (H - 4) + '" font-size="10" text-anchor="end" fill="#5c6166">now</text>';
    // Lines that lie on each other stay apart: the first drawn (the largest) is the widest, each later one
    // narrower on top of it, so a line hidden under another still shows as its edge; the legend says which match.
    lines.forEach(function (s, j) {
      s.width = 2 + 1.2 * Math.min(lines.length - 1 - j, 3);
      s.same = null;
      for (var o = 0; o < j && !s.same; o++) if (alike(lines[o].ys, s.ys)) s.same = lines[o].name;
    });
    lines.forEach(function (s, j) {
      var d = '', pen = false;
      s.ys.forEach(function (yv, k) {
        if (yv == null) { pen = false; return; }
        var x = L + (W - L) * (points[k].t - t0) / span, y = T + (H - B - T) * (1 - yv / max);
        d += (pen ? 'L' : 'M') + x.toFixed(1) + ' ' + y.toFixed(1); pen = true;
      });
      g += '<path d="' + d + '" fill="none" stroke="' + (s.color || COLORS[j % COLORS.length]) + '" stroke-width="' + s.width.toFixed(1) + '" stroke-linejoin="round" vector-effect="non-scaling-stroke"' + (s.dash ? ' stroke-dasharray="5 4"' : '') + '/>';
    });
    svg.innerHTML = g;
    $(legendId).innerHTML = lines.length ? lines.map(function (s, j) { var last = lastOf(s.ys); return '<span><i style="' + swatch(s.color || COLORS[j % COLORS.length], s.dash) + '"></i>' + esc(s.name) + ' ' + (unit === 'ms' ? ms(last) : rate(last)) + (s.same ? ' <span class="mute">(on the line of ' + esc(s.same) + ')</span>' : '') + '</span>'; }).join('') : '<span class="empty">nothing counted yet</span>';
  }
  // The legend's sample of a line: solid, or dashed as the line is.
  function swatch(color, dash) { return dash ? 'background:repeating-linear-gradient(90deg,' + color + ' 0 5px,transparent 5px 8px)' : 'background:' + color; }
  // Two series that would be drawn on each other: within 2 % of the larger at every point.
  function alike(a, b) {
    for (var i = 0; i < a.length; i++) {
      var x = a[i], y = b[i];
      if ((x == null) !== (y == null)) return false;
      if (x != null && Math.abs(x - y) > 0.02 * Math.max(Math.abs(x), Math.abs(y), 1e-9)) return false;
    }
    return a.length > 0;
  }
  function lastOf(ys) { for (var i = ys.length - 1; i >= 0; i--) if (ys[i] != null) return ys[i]; return null; }
  function charts() {
    chart('c-calls', 'l-calls', series(0), 'calls/s');
    chart('c-errors', 'l-errors', series(1), 'calls/s');
    var lat = [];
    series(3).slice(0, 3).forEach(function (s, j) {
      lat.push({ name: s.name + ' p50', ys: points.map(function (p) { return valueAt(p, s.name, 2); }), color: COLORS[j] });
      lat.push({ name: s.name + ' p99', ys: s.ys, dash: true, color: COLORS[j] });
    });
    chart('c-lat', 'l-lat', lat, 'ms');
  }

  // ---- controls (only when the server was started with them: they write rules to the rules store) ----
  function ctlOn() { return hello && hello.controls; }
  function cid(scope, kind, name, field) { return [scope, kind, name, field].join('|'); }
  function note(id) { var n = notes[id]; return '<span class="' + (n && n.ok ? 'done' : 'err') + '" data-note="' + esc(id) + '" role="status">' + (n ? esc(n.text) : '') + '</span>'; }
  function button(label, act, rule, id) { return '<button type="button" data-act="' + act + '" data-rule="' + esc(JSON.stringify(rule)) + '" data-id="' + esc(id) + '">' + esc(label) + '</button>'; }
  function field(id, value, title, wide) { return '<input aria-label="' + esc(title) + '" title="' + esc(title) + '" data-input="' + esc(id) + '"' + (wide ? ' class="wide"' : ' type="number" step="any"') + ' value="' + esc(typed[id] != null ? typed[id] : value) + '">'; }
  function breakerControls(scope, name, s) {
    if (!ctlOn() || !scope) return '';
    var ref = { scope: scope, kind: 'isolate', name: name }, id = cid(scope, 'breaker', name, '');
    return '<span class="ctl">' + (s.isolated ? button('release', 'remove', ref, id) : button('isolate', 'put', { scope: scope, kind: 'isolate', name: name, reason: 'isolated from the dashboard' }, id)) + button('reset', 'put', { scope: scope, kind: 'reset', name: name }, id) + note(id) + '</span>';
  }
  function limitControls(scope, c) {
    if (!ctlOn() || !scope || c.kind !== 'TokenLimiter') return '';
    var id = cid(scope, 'token-limiter', c.name, 'rate');
    return '<span class="ctl">' + field(id, c.status.rate, 'new rate, calls/s') + '<span class="mute">/s</span>' + button('set limit', 'limit', { scope: scope, kind: 'token-limiter', name: c.name }, id) + note(id) + '</span>';
  }
  function weightControls(scope, service, inst) {
    if (!ctlOn() || !scope || !service) return '';
    var id = cid(scope, 'weights', service, inst.id);
    return '<span class="ctl">' + field(id, inst.weight != null ? inst.weight : 1, 'weight of ' + inst.id) + button('set weight', 'weight', { scope: scope, kind: 'weights', name: service, instance: inst.id }, id) + note(id) + '</span>';
  }
  // The fault rehearsal's fields: FaultInjector's options ({ delay: { ms, percent }, abort: { percent, status } })
  // and the rule's life. A field left empty is left out; the rule's validation names the one at fault.
  var FAULT_FIELDS = [['fault.delay.ms', 'delay, ms', ''], ['fault.delay.percent', 'of calls delayed, %', ''], ['fault.abort.percent', 'of calls failed, %', '10'], ['fault.abort.status', 'failed with status', '503']];
  function faultCard(scope) {
    if (!ctlOn() || !scope) return '';
    var id = cid(scope, 'fault', '', '');
    var parts = '<label>service or route ' + field(id + 'name', '', 'service or route', true) + '</label>' + note(id + 'name');
    FAULT_FIELDS.forEach(function (f) { parts += '<label>' + esc(f[1]) + ' ' + field(id + f[0], f[2], f[1]) + '</label>' + note(id + f[0]); });
    parts += '<label>ends after, s ' + field(id + 'ttlMs', 600, 'rehearsal length, s') + '</label>' + note(id + 'ttlMs');
    return card('Fault rehearsal', '<div class="ctl">' + parts + button('start rehearsal', 'fault', { scope: scope, kind: 'fault' }, id) + note(id) + '</div>');
  }
  function send(act, rule, id) {
    var body = rule, path = act === 'remove' ? 'controls/remove' : 'controls/put';
    function value(k) { var el = document.querySelector('[data-input="' + CSS.escape(k) + '"]'); return el ? el.value : ''; }
    function number(k) { var v = value(k).trim(); return v === '' ? undefined : Number(v); }
    if (act === 'limit') body = { scope: rule.scope, kind: rule.kind, name: rule.name, set: { rate: value(id) === '' ? null : Number(value(id)) } };
    if (act === 'weight') { var w = {}; w[rule.instance] = value(id) === '' ? null : Number(value(id)); body = { scope: rule.scope, kind: 'weights', name: rule.name, weights: w }; }
    if (act === 'fault') {
      var fault = {};
      FAULT_FIELDS.forEach(function (f) {
        var v = number(id + f[0]); if (v === undefined) return;
        var path = f[0].split('.'); (fault[path[1]] = fault[path[1]] || {})[path[2]] = v;
      });
      var ttl = number(id + 'ttlMs');
      body = { scope: rule.scope, kind: 'fault', name: value(id + 'name'), fault: fault };
      if (ttl !== undefined) body.ttlMs = Math.round(ttl * 1000);
    }
    var headers = { 'content-type': 'application/json' };
    if (token) headers.authorization = 'Bearer ' + token;
    Object.keys(notes).forEach(function (k) { if (k.indexOf(id) === 0) delete notes[k]; });
    fetch(path, { method: 'POST', headers: headers, body: JSON.stringify(body), credentials: 'same-origin' }).then(function (r) {
      return r.json().then(function (j) {
        // A refusal goes beside the field it names when the page has one, else beside the button.
        var at = !r.ok && j.field && document.querySelector('[data-note="' + CSS.escape(id + j.field) + '"]') ? id + j.field : id;
        notes[at] = r.ok ? { ok: true, text: 'written: ' + j.key + ' (revision ' + j.revision + ')' } : { text: (j.field && at === id && act !== 'limit' && act !== 'weight' ? j.field + ': ' : '') + j.error };
        if (r.ok) Object.keys(typed).forEach(function (k) { if (k.indexOf(id) === 0) delete typed[k]; });
        render(true);
      });
    }, function (e) { notes[id] = { text: 'not sent: ' + e.message }; render(true); });
  }
  $('body').addEventListener('input', function (e) { var k = e.target.getAttribute && e.target.getAttribute('data-input'); if (k) typed[k] = e.target.value; });
  $('body').addEventListener('click', function (e) {
    var b = e.target.closest ? e.target.closest('button[data-act]') : null; if (!b) return;
    e.stopPropagation();
    send(b.getAttribute('data-act'), JSON.parse(b.getAttribute('data-rule')), b.getAttribute('data-id'));
  });

  // ---- actions (only when the server was given them: buttons acting on this process itself, not rules) ----
  var actionsAt = 0, actionNote = null;
  function loadActions() {
    actionsAt = Date.now();
    fetch('actions.json' + suffix, { credentials: 'same-origin' }).then(function (r) { return r.ok ? r.json() : null; }).then(function (j) { if (j) drawActions(j); }, function () {});
  }
  function drawActions(j) {
    var byTarget = {}, order = [];
    j.actions.forEach(function (a) { if (!byTarget[a.target]) { byTarget[a.target] = { state: a.state, buttons: [] }; order.push(a.target); } byTarget[a.target].buttons.push(a); });
    var rows = order.map(function (t) {
      var x = byTarget[t], st = x.state || '', cls = /^(up|healthy|answering|normal)$/.test(st) ? 'ok' : /killed|down|broken|failing/.test(st) ? 'bad' : st ? 'warn' : 'off';
      return '<tr data-target="' + esc(t) + '"><td>' + esc(t) + '</td><td>' + (st ? badge(st, cls) : '') + '</td><td>' + x.buttons.map(function (a) { return '<button data-action="' + esc(a.id) + '">' + esc(a.label) + '</button>'; }).join('') + '</td></tr>';
    });
    var el = $('actions');
    el.innerHTML = '<h2>' + esc(j.title) + ' <span class="mute">— act on this process directly; not rules, nothing is written to a rules store</span></h2>' + table(['target', 'state', 'action'], rows) + (actionNote ? '<p class="' + (actionNote.ok ? 'done' : 'err') + '" id="action-note">' + esc(actionNote.text) + '</p>' : '');
    el.hidden = false;
  }
  $('actions').addEventListener('click', function (e) {
    var b = e.target.closest ? e.target.closest('button[data-action]') : null; if (!b) return;
    var headers = { 'content-type': 'application/json' };
    if (token) headers.authorization = 'Bearer ' + token;
    b.disabled = true;
    fetch('actions/' + encodeURIComponent(b.getAttribute('data-action')), { method: 'POST', headers: headers, body: '{}', credentials: 'same-origin' }).then(function (r) {
      return r.json().then(function (j) { actionNote = r.ok ? { ok: true, text: j.done } : { text: j.error }; loadActions(); });
    }, function (err) { actionNote = { text: 'not sent: ' + err.message }; loadActions(); });
  });

  // ---- components ----
  function breakerWord(s) {
    if (s.isolated) return badge('isolated by a rule', 'bad');
    if (s.reason === 'fleet') return badge('open: fleet', 'bad');
    if (s.state === 'open') return badge('open: tripped', 'bad');
    if (s.state === 'half-open') return badge('half-open: probing', 'warn');
    return badge('closed', 'ok');
  }
  function breakerRow(name, s, scope, ctlName) { return row([esc(name), breakerWord(s), N(pct(s.failureRate)), N(s.slowCallRate == null ? '–' : pct(s.slowCallRate)), N(num((s.successfulCalls || 0) + (s.failedCalls || 0), 0)), N(num(s.notPermittedCalls || s.drops || 0, 0))].concat(ctlOn() ? [breakerControls(scope, ctlName || name, s)] : [])); }
  function breakerHead() { return ['breaker', 'state', '#failure rate', '#slow-call rate', '#calls', '#refused'].concat(ctlOn() ? ['control'] : []); }
  function balancerRows(name, b, scope, service) {
    var up = b.available != null ? b.available : null;
    var why = [];
    if (b.ejected) why.push(b.ejected + ' ejected'); if (b.down) why.push(b.down + ' down'); if (b.breakerOpen) why.push(b.breakerOpen + ' breaker open');
    var word = b.panic ? badge('panic: all in rotation', 'bad') : why.length ? badge('degraded: ' + why.join(', '), 'warn') : badge('healthy', 'ok');
    var out = [row([esc(name), word, N(num(Array.isArray(b.instances) ? b.instances.length : b.instances, 0)), N(num(up, 0)), N(num(b.ejected, 0)), N(num(b.down, 0)), N(num(b.breakerOpen, 0))].concat(ctlOn() ? [''] : []))];
    (b.instances && b.instances.map ? b.instances : []).forEach(function (i) {
      var w = i.ejected ? badge('ejected', 'bad') : i.up ? badge('up', 'ok') : badge('down', 'bad');
      // An instance's own values, each saying what it is: they are not its balancer's columns.
      out.push(row(['<span class="mute">↳ ' + esc(i.address || i.id) + '</span>', w, N(i.weight != null ? 'weight ' + num(i.weight) : '', ''), N(ms(i.ewmaMs), 'latency'), N(count(i.timesEjected || 0, i.timesEjected === 1 ? 'ejection' : 'ejections'), ''), '', ''].concat(ctlOn() ? [weightControls(scope, service, i)] : [])));
    });
    return out;
  }
  function balHead() { return ['balancer', 'health', '#instances', '#available', '#ejected', '#down', '#breaker open'].concat(ctlOn() ? ['weight'] : []); }
  function limiterRow(c, scope) {
    var s = c.status, mode = s.mode ? (s.mode === 'rescue' ? badge('rescue (Redis away)', 'warn') : badge(s.mode, 'ok')) : badge('local', 'ok');
    var refusedShare = (s.allowed + s.limited) > 0 ? s.limited / (s.allowed + s.limited) : 0;
    return row([esc(c.name), esc(c.kind), mode, N(num(s.allowed, 0)), N(num(s.limited, 0)), N(pct(refusedShare)), N(s.rate != null ? num(s.rate) + ' /s' : s.quota != null ? num(s.quota) + ' per ' + ms(s.periodMs) : '–')]) + (ctlOn() && scope && c.kind === 'TokenLimiter' ? '<tr><td colspan="7"><span class="mute">change the limit of ' + esc(c.name) + ':</span> ' + limitControls(scope, c) + '</td></tr>' : '');
  }
  function renderComponents(comps, scope) {
    var br = [], bal = [], ret = [], lim = [], shed = [], reg = [], cache = [], rules = [], other = [];
    comps.forEach(function (c) {
      var s = c.status || {}, k = c.kind;
      if (k === 'CircuitBreaker' || k === 'SreBreaker') br.push(breakerRow(c.name, s, k === 'CircuitBreaker' ? scope : null));
      else if (k === 'BreakerGroup') { var m = s.breakers || {}; Object.keys(m).slice(0, 50).forEach(function (key) { br.push(breakerRow(c.name + ' › ' + key, m[key], scope, key)); }); }
      else if (k === 'Balancer') bal.push.apply(bal, balancerRows(c.name, s, scope, s.service || c.name));
      else if (k === 'ResilientClient') {
        (s.services || []).forEach(function (x) { if (x.balancer) bal.push.apply(bal, balancerRows(c.name + ' › ' + x.service, x.balancer)); });
        ret.push(row([esc(c.name), 'client', N(num(s.retries, 0)), N(num(s.retriesRefused, 0)), N(num(s.fallbacks, 0)), N('–')]));
      } else if (k === 'RetryBudget') ret.push(row([esc(c.name), 'budget', N(num(s.retries, 0)), N(num(s.refused, 0)), N('–'), N(num(s.balance, 0) + ' %')]));
      else if (k === 'Retry') ret.push(row([esc(c.name), 'retry', N(s.maxAttempts != null ? count(s.maxAttempts, 'attempts max') : '–', ''), N('–'), N('–'), N('–')]));
      else if (/Limiter$/.test(k)) lim.push(limiterRow(c, scope));
      else if (k === 'HttpGuard') lim.push(row([esc(c.name), k, badge(s.failedOpen ? 'failing open' : 'guarding', s.failedOpen ? 'warn' : 'ok'), N(num(s.passed, 0)), N(num((s.limited || 0) + (s.shed || 0) + (s.broken || 0), 0)), N('–'), N('–')]));
      else if (k === 'AdaptiveShedder') {
        var l = s.load || {};
        shed.push(row([esc(c.name), s.overloaded ? badge('shedding', 'bad') : badge('normal', 'ok'), N(num(s.inFlight, 0)), N(num(s.maxInFlight, 0)), N(num(s.dropped, 0)), N(pct(l.utilization)), N(ms(l.delayP99Ms))]));
      } else if (k === 'RegistryCache') {
        (s.entries || []).forEach(function (e) { reg.push(row([esc(c.name + ' › ' + e.service), e.failing ? badge('stale', 'warn') : e.fresh || e.watched ? badge('up', 'ok') : badge('expired', 'off'), N(num(e.instances, 0)), N(e.failing ? since(e.staleForMs) : '–')])); });
        if (!(s.entries || []).length) reg.push(row([esc(c.name), badge('no services', 'off'), N('–'), N('–')]));
      } else if (k === 'EtcdRegistry' || k === 'MemoryRegistry') reg.push(row([esc(c.name), badge(s.up === false || s.connected === false ? 'down' : 'up', s.up === false || s.connected === false ? 'bad' : 'ok'), N(s.services != null ? count(s.services, 'services') : '–', ''), N('–')]));
      else if (k === 'Group') {
        var hr = s.hitRatio;
        cache.push(row([esc(c.name), badge(hr == null || s.gets === 0 ? 'idle' : hr < 0.5 ? 'missing' : 'hitting', hr == null || s.gets === 0 ? 'off' : hr < 0.5 ? 'warn' : 'ok'), N(pct(hr)), N(num(s.loads, 0)), N(num(s.peerLoads, 0)), N(num(s.peerErrors, 0)), N(bytes(s.caches && s.caches.main ? s.caches.main.bytes : null))]));
      } else if (k === 'HttpPool') {
        (s.members || []).forEach(function (mb) { var u = typeof mb === 'string' ? mb : mb.url || mb.id; cache.push(row(['<span class="mute">ring › ' + esc(u) + '</span>', badge(u === s.self ? 'this node' : 'peer', 'off'), N(s.shares && s.shares[u] != null ? pct(s.shares[u]) + ' of keys' : mb.share != null ? pct(mb.share) + ' of keys' : 'share not reported', ''), '', '', '', ''])); });
      } else if (k === 'Rules') rules.push(c);
      else other.push(c);
    });
    var html = '';
    html += card('Breakers', table(breakerHead(), br));
    html += card('Balancers', table(balHead(), bal));
    html += card('Retries', table(['owner', 'kind', '#retries', '#refused', '#fallbacks', '#budget left'], ret));
    html += card('Limiters', table(['limiter', 'kind', 'mode', '#admitted', '#refused', '#refused share', '#limit'], lim));
    html += card('Shedders and event loop', table(['shedder', 'state', '#in flight', '#max in flight', '#dropped', '#loop use', '#loop delay p99'], shed));
    html += card('Registry', table(['registry › service', 'state', '#instances', '#stale for'], reg));
    html += card('Cache', table(['group', 'state', '#hit ratio', '#loads', '#peer loads', '#peer errors', '#size'], cache));
    rules.forEach(function (c) { html += card('Rules: ' + c.name, rulesHtml(c.status)); });
    other.forEach(function (c) { html += card(c.kind + ': ' + c.name, generic(c.status)); });
    html += faultCard(scope);
    // With controls, one card a row: every field and its message in view.
    return '<div class="grid' + (ctlOn() && scope ? ' one' : '') + '">' + (html || '<p class="empty">no components tracked</p>') + '</div>';
  }
  // A Rules binder's snapshot: its counters, and per bound component the rules it runs and any it refused.
  function rulesHtml(s) {
    var rows = [];
    (s.components || []).forEach(function (b) {
      var word = b.refused && b.refused.length ? badge(b.refused.length + ' refused', 'bad') : b.isolated ? badge('isolated by a rule', 'bad') : b.rules.length ? badge('running ' + b.rules.length, 'ok') : badge('built options', 'off');
      rows.push(row([esc(b.kind + ' ' + b.name), word, b.rules.length ? esc(b.rules.join(', ')) : '<span class="mute">none</span>', N(num(b.revision, 0))]));
      (b.refused || []).forEach(function (r) { rows.push(row(['<span class="mute">↳ refused ' + esc(r.key) + '</span>', badge(r.code === 'ERR_RULE_REFUSED' ? 'refused by the component' : 'invalid', 'bad'), '<span class="err">' + esc((r.field ? r.field + ': ' : '') + r.message) + '</span>', N(num(r.revision, 0))])); });
    });
    function many(n, one, more) { return num(n, 0) + ' ' + (n === 1 ? one : more); }
    var head = '<p class="mute">' + many(s.rules, 'rule held', 'rules held') + ' · ' + many(s.bindings, 'component bound', 'components bound') + ' · store revision ' + num(s.revision, 0) + (s.storeErrors ? ' · ' + many(s.storeErrors, 'store error', 'store errors') : '') + '</p>';
    return head + (table(['component', 'state', 'rules it runs', '#revision'], rows) || '<p class="empty">no component bound</p>');
  }
  function unitOf(key, v) {
    if (/Ms$/.test(key)) return ms(v);
    if (/(Ratio|Rate|utilization)$/.test(key)) return pct(v);
    if (/[Bb]ytes$/.test(key)) return bytes(v);
    return num(v) + ' ' + key.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  }
  function generic(s) {
    if (s == null || typeof s !== 'object') return '<p>' + esc(String(s)) + '</p>';
    var rows = [];
    Object.keys(s).forEach(function (k) { var v = s[k]; if (typeof v === 'number') rows.push(row([esc(k), N(unitOf(k, v))])); else if (typeof v === 'string' || typeof v === 'boolean') rows.push(row([esc(k), esc(String(v))])); });
    return table(['field', '#value'], rows) || '<p class="empty">nothing to show</p>';
  }

  // ---- fleet ----
  var WORD = { up: ['up', 'ok'], connecting: ['connecting', 'warn'], unreachable: ['unreachable', 'bad'], gone: ['gone', 'off'] };
  function renderFleet(f) {
    var bySvc = {};
    f.instances.forEach(function (i) { (bySvc[i.service] = bySvc[i.service] || []).push(i); });
    var html = '';
    Object.keys(bySvc).sort().forEach(function (svc) {
      var list = bySvc[svc], up = list.filter(function (i) { return i.state === 'up'; }).length;
      var rows = [];
      list.forEach(function (i) {
        var key = svc + '/' + i.id, v = headline(f.point, key), w = WORD[i.state] || [i.state, 'off'];
        rows.push('<tr class="inst" data-key="' + esc(key) + '">' + ['<td>' + (open[key] ? '▾ ' : '▸ ') + esc(i.id) + '</td>', '<td>' + esc(i.address) + '</td>', '<td>' + badge(w[0], w[1]) + (i.reason ? ' <span class="mute">' + esc(i.reason) + '</span>' : '') + '</td>', '<td class="n">' + rate(v[0]) + '</td>', '<td class="n">' + rate(v[1]) + '</td>', '<td class="n">' + ms(v[2]) + '</td>', '<td class="n">' + ms(v[3]) + '</td>', '<td class="n">' + (i.ageMs == null ? '–' : num(i.ageMs / 1000, 1) + ' s ago') + '</td>'].join('') + '</tr>');
        if (open[key] && i.frame) rows.push('<tr class="detail"><td colspan="8">' + renderComponents(i.frame.components, i.state === 'up' ? svc + '@' + i.id : null) + '</td></tr>');
      });
      html += card(svc + ' — ' + up + ' of ' + list.length + ' instances up', table(['instance', 'address', 'state', '#calls', '#errors', '#p50', '#p99', '#last data'], rows));
    });
    if (f.registryError) html = card('Registry', '<p>' + badge('not answering', 'bad') + ' ' + esc(f.registryError) + '</p>') + html;
    return html || '<p class="empty">no instance announces a status path yet</p>';
  }
  function headline(p, key) { return p.c[key] || [null, null, null, null]; }
  $('body').addEventListener('click', function (e) {
    var tr = e.target.closest ? e.target.closest('tr.inst') : null; if (!tr) return;
    var k = tr.getAttribute('data-key'); open[k] = !open[k]; render();
  });

  function render(now) {
    if (!frame) return;
    // The values first, then the charts. Not while a field is being edited: what is typed stays, and the next tick draws the rest.
    var a = document.activeElement;
    if (now || !(a && a.tagName === 'INPUT' && $('body').contains(a))) $('body').innerHTML = frame.mode === 'fleet' ? renderFleet(frame) : renderComponents(frame.components, hello && hello.scope);
    charts();
  }
  // The data the server embedded in the page (its last frame and history): values drawn now, before the stream is open.
  var boot = null;
  try { boot = JSON.parse($('boot').textContent); } catch (e) { /* a page without its data waits for the stream */ }
  if (boot) {
    onHello(boot.hello);
    if (boot.history) points = boot.history;
    if (boot.frame) { mark('bulwark-embedded-data'); onFrame(boot.frame); }
  }
  connect();
  setInterval(watch, 1000);
})();
</script>
</body>
</html>
`;
