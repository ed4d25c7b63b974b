// Warren's web console: one page, plain JavaScript, no dependencies. It
// talks to the management API under api/ (relative, so the console works
// mounted under any prefix) with HTTP basic credentials kept in this tab's
// sessionStorage. See internal/console/doc.go and docs/console.md.
'use strict';

(function () {
  const HISTORY = 'msg_rates_age=600&msg_rates_incr=5&lengths_age=600&lengths_incr=5';
  const state = { auth: sessionStorage.getItem('warren.auth'), user: null, tags: [], page: null, timer: 0, seq: 0 };

  // ---- DOM helpers ---------------------------------------------------

  const $ = (sel, root) => (root || document).querySelector(sel);

  // h builds an element: attrs may hold class, testid (data-testid),
  // on<event> handlers, and any other attribute; children are nodes,
  // strings or arrays of them (null and false are skipped).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'testid') el.dataset.testid = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else el.setAttribute(k, v === true ? '' : v);
    }
    add(el, children);
    return el;
  }
  function add(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) add(el, c);
      else el.append(c instanceof Node ? c : String(c));
    }
  }
  function fill(el, ...children) { el.replaceChildren(); add(el, children); return el; }

  const enc = encodeURIComponent;
  const fmtNum = (n) => (n === undefined || n === null) ? '–' : Number(n).toLocaleString('en');
  const fmtRate = (d) => (d && typeof d.rate === 'number') ? d.rate.toFixed(d.rate < 10 ? 1 : 0) + '/s' : '–';
  function fmtBytes(n) {
    if (n === undefined || n === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + ' ' + u[i];
  }
  function fmtAge(ms) {
    if (ms === null || ms === undefined) return '–';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }
  const get = (o, path) => path.split('.').reduce((v, k) => (v === null || v === undefined) ? undefined : v[k], o);

  let toastTimer = 0;
  function toast(text, bad) {
    const t = $('#toast');
    t.textContent = text;
    t.classList.toggle('error', !!bad);
    t.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => t.classList.remove('show'), 4000);
  }

  // ---- API -----------------------------------------------------------

  class APIError extends Error {
    constructor(status, reason) { super(reason); this.status = status; }
    get denied() { return this.status === 401 || this.status === 403; }
  }

  // RawJSON is a request body that is JSON text already (a definitions
  // file), sent as it is.
  class RawJSON { constructor(text) { this.text = text; } }

  // api calls the management API. A body is sent as application/json, the
  // only type the API takes for a change (a form post of another site
  // cannot send it).
  async function api(method, path, body, headers) {
    const init = { method, headers: Object.assign({ 'X-Requested-With': 'XMLHttpRequest' }, headers || {}) };
    if (state.auth) init.headers.Authorization = 'Basic ' + state.auth;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = body instanceof RawJSON ? body.text : JSON.stringify(body);
    }
    const r = await fetch('api/' + path, init);
    const text = await r.text();
    let data = null;
    if (text) { try { data = JSON.parse(text); } catch (e) { data = text; } }
    if (!r.ok) {
      const reason = (data && data.reason) || (data && data.error) || r.statusText;
      if (r.status === 401 && reason === 'Login failed') { logout('Your login is no longer accepted.'); }
      throw new APIError(r.status, typeof reason === 'string' ? reason : JSON.stringify(reason));
    }
    return data;
  }

  // ---- Session -------------------------------------------------------

  async function login(user, pass) {
    state.auth = btoa(unescape(enc(user + ':' + pass)));
    try {
      const me = await api('GET', 'whoami');
      sessionStorage.setItem('warren.auth', state.auth);
      return me;
    } catch (e) {
      state.auth = null;
      throw e;
    }
  }

  function logout(why) {
    state.auth = null;
    state.user = null;
    sessionStorage.removeItem('warren.auth');
    clearTimeout(state.timer);
    showLogin(why || '');
  }

  function showLogin(msg) {
    $('.top').hidden = true;
    $('#alarms').hidden = true;
    fill($('#page'));
    $('#login').hidden = false;
    $('#login-error').textContent = msg;
    $('#login-username').focus();
  }

  const isAdmin = () => state.tags.includes('administrator');
  const isPolicymaker = () => isAdmin() || state.tags.includes('policymaker');

  function startSession(me) {
    state.user = me.name;
    state.tags = Array.isArray(me.tags) ? me.tags : String(me.tags || '').split(',').filter(Boolean);
    $('#login').hidden = true;
    $('.top').hidden = false;
    $('#whoami').textContent = me.name + (state.tags.length ? ' (' + state.tags.join(', ') + ')' : '');
    document.querySelectorAll('#nav .admin').forEach((li) => { li.hidden = !isAdmin(); });
    document.querySelectorAll('#nav .policy').forEach((li) => { li.hidden = !isPolicymaker(); });
    route();
  }

  // ---- Charts --------------------------------------------------------

  const COLORS = ['--c1', '--c2', '--c3', '--c4', '--c5', '--c6'];
  const color = (i) => getComputedStyle(document.documentElement).getPropertyValue(COLORS[i % COLORS.length]).trim();

  // ratePoints turns a counter's samples (newest first) into [time, rate]
  // points, oldest first; lengthPoints a gauge's into [time, value].
  function ratePoints(details) {
    const s = details && details.samples;
    if (!Array.isArray(s) || s.length < 2) return null;
    const out = [];
    for (let i = s.length - 1; i > 0; i--) {
      const dt = (s[i - 1].timestamp - s[i].timestamp) / 1000;
      if (dt > 0) out.push([s[i - 1].timestamp, Math.max(0, (s[i - 1].sample - s[i].sample) / dt)]);
    }
    return out.length ? out : null;
  }
  function lengthPoints(details) {
    const s = details && details.samples;
    if (!Array.isArray(s) || s.length < 2) return null;
    return s.slice().reverse().map((p) => [p.timestamp, p.sample]);
  }

  // hiddenSeries holds the chart lines turned off in their legend, by
  // chart title and series key, so that a refresh redraws them off too.
  const hiddenSeries = new Set();

  // chart draws series ([{key, label, points, under}]) as an SVG line
  // chart in box, or "no data yet" while no series has two points. A
  // series marked under (a total that equals a part of it when the other
  // parts are 0, as Total and Ready with nothing unacked) is drawn first,
  // as a wide pale band, so the thin lines drawn over it stay visible and
  // it stays visible round them. Each legend entry is a button that turns
  // its line off and on (RabbitMQ's "click to toggle line").
  function chart(box, title, series, unit) {
    const svgNS = 'http://www.w3.org/2000/svg';
    const live = series.filter((s) => s.points && s.points.length > 1);
    const head = h('h3', null, title);
    if (!live.length) {
      fill(box, head, h('p', { class: 'nodata', testid: 'chart-nodata' }, 'No data yet'));
      return;
    }
    let t0 = Infinity, t1 = -Infinity, vmax = 0;
    for (const s of live) for (const [t, v] of s.points) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); vmax = Math.max(vmax, v); }
    vmax = niceCeil(vmax * 1.1);
    const W = 600, H = 150, L = 44, B = 16, T = 6;
    const x = (t) => L + (t1 === t0 ? 0 : (t - t0) / (t1 - t0) * (W - L - 4));
    const y = (v) => T + (1 - v / vmax) * (H - T - B);
    const svg = document.createElementNS(svgNS, 'svg');
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', title + ': ' + live.map((s) => s.label + ' ' + fmtVal(s.points[s.points.length - 1][1], unit)).join(', '));
    const mk = (tag, attrs, text) => {
      const e = document.createElementNS(svgNS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      svg.append(e);
      return e;
    };
    mk('line', { x1: L, y1: y(0), x2: W, y2: y(0), class: 'axis' });
    mk('line', { x1: L, y1: T, x2: L, y2: y(0), class: 'axis' });
    mk('text', { x: L - 4, y: T + 8, 'text-anchor': 'end' }, fmtVal(vmax, unit));
    mk('text', { x: L - 4, y: y(0), 'text-anchor': 'end' }, '0');
    mk('text', { x: L, y: H - 2 }, '-' + Math.round((t1 - t0) / 60000) + ' min');
    mk('text', { x: W - 4, y: H - 2, 'text-anchor': 'end' }, 'now');
    const id = (s) => title + '\u0000' + s.key;
    const lines = new Map();
    const order = series.map((s, i) => [s, i]).sort(([a], [b]) => (b.under ? 1 : 0) - (a.under ? 1 : 0));
    for (const [s, i] of order) {
      if (!s.points || s.points.length < 2) continue;
      const line = mk('polyline', {
        points: s.points.map(([t, v]) => x(t).toFixed(1) + ',' + y(v).toFixed(1)).join(' '),
        fill: 'none', stroke: color(i), 'stroke-width': s.under ? 7 : 2, 'stroke-opacity': s.under ? 0.4 : 1,
        'stroke-linejoin': 'round', 'vector-effect': 'non-scaling-stroke', 'data-series': s.key,
      });
      if (hiddenSeries.has(id(s))) line.setAttribute('visibility', 'hidden');
      lines.set(s.key, line);
    }
    const swatch = (i, s) => { const e = h('i', { class: s.under ? 'under' : null }); e.style.background = color(i); return e; };
    const legend = h('ul', { class: 'legend' }, series.map((s, i) => {
      const shown = !hiddenSeries.has(id(s));
      const b = h('button', { type: 'button', class: 'series', 'aria-pressed': String(shown), title: 'Show or hide this line', testid: 'chart-toggle-' + s.key,
        onclick: () => {
          const on = hiddenSeries.has(id(s));
          if (on) hiddenSeries.delete(id(s)); else hiddenSeries.add(id(s));
          b.setAttribute('aria-pressed', String(on));
          const line = lines.get(s.key);
          if (line) { if (on) line.removeAttribute('visibility'); else line.setAttribute('visibility', 'hidden'); }
        } }, swatch(i, s), s.label + ' ' + (s.points && s.points.length ? fmtVal(s.points[s.points.length - 1][1], unit) : '–'));
      return h('li', null, b);
    }));
    fill(box, head, svg, legend);
  }
  // niceCeil rounds a chart's top up to 1, 2 or 5 times a power of ten.
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  const fmtVal = (v, unit) => unit === '/s' ? (v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString('en')) + '/s' : Math.round(v).toLocaleString('en');

  function rateChart(box, title, stats, keys) {
    chart(box, title, keys.map(([k, label]) => ({ key: k, label, points: ratePoints(stats && stats[k + '_details']) })), '/s');
  }
  // lengthChart draws queue lengths; the total ('messages') goes under
  // the parts it adds up.
  function lengthChart(box, title, obj, keys) {
    chart(box, title, keys.map(([k, label]) => ({ key: k, label, points: lengthPoints(obj && obj[k + '_details']), under: k === 'messages' })), '');
  }

  // ---- Shared widgets ------------------------------------------------

  // confirmButton acts on the second click within 4 s, so that a
  // destructive action needs a deliberate second press (no modal dialog).
  // A button in a table row passes key, naming what it acts on: the
  // refresh redraws the rows every few seconds, and the redrawn button
  // with the same key stays armed for what is left of the 4 s (armedUntil),
  // so a refresh between the two presses does not swallow the first.
  const armedUntil = new Map();
  function confirmButton(label, testid, action, key) {
    let armed = 0;
    const id = key === undefined ? null : testid + '\u0000' + key;
    const arm = (ms) => {
      b.textContent = 'Really ' + label.toLowerCase() + '?';
      b.classList.add('confirming');
      armed = setTimeout(() => { armed = 0; b.textContent = label; b.classList.remove('confirming'); }, ms);
    };
    const b = h('button', { type: 'button', class: 'danger', testid, onclick: async () => {
      if (!armed) {
        arm(4000);
        if (id !== null) {
          const now = Date.now();
          for (const [k, until] of armedUntil) if (until <= now) armedUntil.delete(k);
          armedUntil.set(id, now + 4000);
        }
        return;
      }
      clearTimeout(armed);
      armed = 0;
      if (id !== null) armedUntil.delete(id);
      b.textContent = label;
      b.classList.remove('confirming');
      b.disabled = true;
      try { await action(); } catch (e) { toast(e.message, true); } finally { b.disabled = false; }
    } }, label);
    const left = id === null ? 0 : (armedUntil.get(id) || 0) - Date.now();
    if (left > 0) arm(left);
    return b;
  }

  function field(label, input) {
    const id = 'f' + (++state.seq);
    input.id = id;
    return h('p', null, h('label', { for: id }, label), ' ', input);
  }

  function parseJSONField(text, what) {
    if (!text.trim()) return {};
    try {
      const v = JSON.parse(text);
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
      return v;
    } catch (e) {
      throw new Error(what + ' must be a JSON object: ' + e.message);
    }
  }

  // form builds a form whose submit runs action(values) and reports its
  // outcome; fields are [label, name, element].
  function form(title, testid, fields, submitLabel, action) {
    const status = h('p', { class: 'status', role: 'status', testid: testid + '-status' });
    const f = h('form', { class: 'box', testid, onsubmit: async (ev) => {
      ev.preventDefault();
      const values = {};
      for (const [, name, el] of fields) values[name] = el.type === 'checkbox' ? el.checked : el.value;
      status.textContent = '';
      status.classList.remove('error');
      try {
        const msg = await action(values);
        status.textContent = msg || 'Done.';
        refreshNow();
      } catch (e) {
        status.textContent = e.message;
        status.classList.add('error');
      }
    } }, h('h2', null, title), fields.map(([label, , el]) => field(label, el)),
    h('p', null, h('button', { type: 'submit', testid: testid + '-submit' }, submitLabel)), status);
    return f;
  }

  function vhostSelect(testid) {
    const sel = h('select', { testid });
    api('GET', 'vhosts').then((vs) => {
      fill(sel, vs.map((v) => h('option', { value: v.name }, v.name)));
    }).catch(() => fill(sel, h('option', { value: '/' }, '/')));
    return sel;
  }

  function denied(box, e, title) {
    fill(box, title ? h('h1', null, title) : null, h('div', { class: 'denied', role: 'alert', testid: 'access-denied' },
      h('h2', null, 'Access refused'),
      h('p', null, 'The broker refused this page to ' + state.user + ': ' + e.message + '.')));
  }

  // table renders rows into a table with sortable headers; cols are
  // {label, key (sort field), cell(row) → node/string, n (numeric), narrow}.
  function table(cols, rows, opts) {
    opts = opts || {};
    const head = h('tr', null, cols.map((c) => {
      const th = h('th', { scope: 'col', class: (c.n ? 'n ' : '') + (c.narrow ? 'hide-narrow' : '') });
      if (c.key && opts.sort) {
        const active = opts.sort.key === c.key;
        if (active) th.setAttribute('aria-sort', opts.sort.reverse ? 'descending' : 'ascending');
        th.append(h('button', { type: 'button', class: 'sort', onclick: () => opts.onSort(c.key) }, c.label));
      } else th.append(c.label);
      return th;
    }));
    const body = h('tbody', null, rows.length ? rows.map((r) => h('tr', { testid: opts.rowTestid },
      cols.map((c) => h('td', { class: (c.n ? 'n ' : '') + (c.narrow ? 'hide-narrow' : ''), testid: c.testid }, c.cell(r))))) :
      h('tr', null, h('td', { colspan: cols.length, class: 'muted' }, opts.empty || 'None.')));
    return h('div', { class: 'tablewrap' }, h('table', { testid: opts.testid }, h('thead', null, head), body));
  }

  // pagedList is a filterable, sortable, paginated list of an API
  // listing that supports RabbitMQ's page parameters.
  function pagedList(box, opts) {
    const st = { page: 1, size: 50, name: '', regex: false, sort: opts.sort || '', reverse: false, last: null, seq: 0 };
    const filter = h('input', { type: 'search', placeholder: 'Filter by name', 'aria-label': 'Filter ' + opts.what + ' by name', testid: opts.what + '-filter', class: 'filter' });
    const regex = h('input', { type: 'checkbox', 'aria-label': 'Regular expression', testid: opts.what + '-regex' });
    const size = h('select', { 'aria-label': 'Page size', testid: opts.what + '-page-size' }, [20, 50, 100, 500].map((n) => h('option', { value: n, selected: n === 50 }, n)));
    const info = h('span', { class: 'status', testid: opts.what + '-count', 'aria-live': 'polite' });
    const prev = h('button', { type: 'button', class: 'secondary', testid: opts.what + '-prev', onclick: () => { st.page--; load(); } }, '← Previous');
    const next = h('button', { type: 'button', class: 'secondary', testid: opts.what + '-next', onclick: () => { st.page++; load(); } }, 'Next →');
    const list = h('div', { testid: opts.what + '-list' });
    let debounce = 0;
    filter.addEventListener('input', () => { clearTimeout(debounce); debounce = setTimeout(() => { st.name = filter.value; st.page = 1; load(); }, 250); });
    regex.addEventListener('change', () => { st.regex = regex.checked; st.page = 1; load(); });
    size.addEventListener('change', () => { st.size = +size.value; st.page = 1; load(); });
    fill(box, h('div', { class: 'toolbar' }, h('span', { class: 'grow' }, filter), h('label', null, regex, ' Regex'), h('label', null, 'Per page ', size)),
      list, h('div', { class: 'pager' }, prev, next, info));
    async function load() {
      const q = new URLSearchParams({ page: st.page, page_size: st.size });
      if (st.name) { q.set('name', st.name); if (st.regex) q.set('use_regex', 'true'); }
      if (st.sort) { q.set('sort', st.sort); if (st.reverse) q.set('sort_reverse', 'true'); }
      const started = performance.now();
      const mine = ++st.seq; // a later load (typing in the filter) wins
      let res;
      try {
        res = await api('GET', opts.path + '?' + q);
        if (mine !== st.seq) return;
      } catch (e) {
        if (mine !== st.seq) return;
        if (e.denied) { denied(list, e); return; }
        if (e.status === 400 && st.page > 1) { st.page = 1; return load(); }
        fill(list, h('p', { class: 'error', role: 'alert' }, e.message));
        return;
      }
      st.last = res;
      fill(list, table(opts.cols, res.items, {
        rowTestid: opts.rowTestid, testid: opts.what + '-table', empty: opts.empty,
        sort: { key: st.sort || 'name', reverse: st.reverse },
        onSort: (k) => { if ((st.sort || 'name') === k) st.reverse = !st.reverse; else { st.sort = k; st.reverse = false; } load(); },
      }));
      prev.disabled = st.page <= 1;
      next.disabled = st.page >= res.page_count;
      info.textContent = `Page ${res.page} of ${Math.max(res.page_count, 1)} · ${fmtNum(res.filtered_count)} of ${fmtNum(res.total_count)} ${opts.what}`;
      box.dataset.loadMs = Math.round(performance.now() - started);
    }
    return { refresh: load, focusFilter: () => filter.focus() };
  }

  function link(href, text, testid) { return h('a', { href, testid }, text); }
  const queueHref = (q) => '#/queues/' + enc(q.vhost) + '/' + enc(q.name);
  const exchangeHref = (x) => '#/exchanges/' + enc(x.vhost) + '/' + enc(x.name || 'amq.default');
  const connHref = (name) => '#/connections/' + enc(name);
  // features are the Features column's tags: the properties, then the
  // arguments the one argument table abbreviates (args.js), as RabbitMQ's
  // management UI shows them.
  const argShorts = window.WARREN_ARG_SHORTS || {};
  const features = (o) => [o.durable && 'D', o.auto_delete && 'AD', o.exclusive && 'Excl', o.internal && 'I']
    .concat(Object.keys(o.arguments || {}).sort().map((k) => argShorts[k]))
    .filter(Boolean).map((f) => h('span', { class: 'tag' }, f));

  function propsList(obj) {
    const entries = Object.entries(obj || {});
    if (!entries.length) return h('span', { class: 'muted' }, 'none');
    return h('dl', { class: 'props' }, entries.map(([k, v]) => [h('dt', null, k), h('dd', null, typeof v === 'object' ? JSON.stringify(v) : String(v))]));
  }

  // ---- Pages ---------------------------------------------------------

  const pages = {};

  pages.overview = (main) => {
    const cards = h('div', { class: 'cards', testid: 'overview-totals' });
    const rates = h('div', { class: 'chart', testid: 'chart-rates' });
    const depth = h('div', { class: 'chart', testid: 'chart-depth' });
    const nodes = h('div', { testid: 'overview-nodes' });
    const about = h('div', { class: 'box', testid: 'overview-about' });
    fill(main, h('h1', null, 'Overview'), cards, h('h2', null, 'Messages'), h('div', { class: 'charts' }, depth, rates),
      h('h2', null, 'Nodes'), nodes, h('h2', null, 'Cluster'), about);
    return { async refresh() {
      const [o, ns] = await Promise.all([api('GET', 'overview?' + HISTORY), api('GET', 'nodes').catch(() => [])]);
      const qt = o.queue_totals || {}, ot = o.object_totals || {}, ms = o.message_stats || {};
      const card = (k, v, id) => h('div', { class: 'card', testid: 'total-' + id }, h('div', { class: 'v' }, v), h('div', { class: 'k' }, k));
      fill(cards, card('Ready', fmtNum(qt.messages_ready), 'ready'), card('Unacked', fmtNum(qt.messages_unacknowledged), 'unacked'),
        card('Total', fmtNum(qt.messages), 'messages'), card('Publish', fmtRate(ms.publish_details), 'publish'),
        card('Deliver / get', fmtRate(ms.deliver_get_details), 'deliver'),
        card('Connections', fmtNum(ot.connections), 'connections'), card('Channels', fmtNum(ot.channels), 'channels'),
        card('Queues', fmtNum(ot.queues), 'queues'), card('Exchanges', fmtNum(ot.exchanges), 'exchanges'),
        card('Consumers', fmtNum(ot.consumers), 'consumers'));
      lengthChart(depth, 'Queued messages', qt, [['messages_ready', 'Ready'], ['messages_unacknowledged', 'Unacked'], ['messages', 'Total']]);
      rateChart(rates, 'Message rates', ms, [['publish', 'Publish'], ['deliver_get', 'Deliver / get'], ['ack', 'Ack'],
        ['redeliver', 'Redelivered'], ['dead_lettered', 'Dead-lettered'], ['return_unroutable', 'Unroutable']]);
      fill(nodes, table([
        { label: 'Name', cell: (n) => n.name },
        { label: 'State', cell: (n) => n.running ? 'running' : 'down' },
        { label: 'Memory', cell: (n) => fmtBytes(n.mem_used), testid: 'node-memory' },
        { label: 'Message memory', cell: (n) => [fmtBytes(n.mem_message_bytes), n.mem_limit ? ' of ' + fmtBytes(n.mem_limit) : '', n.mem_alarm ? h('strong', { class: 'error' }, ' ALARM') : ''], testid: 'node-message-memory' },
        { label: 'Disk free', cell: (n) => [n.disk_free === undefined ? 'not watched' : fmtBytes(n.disk_free), n.disk_free_limit ? ' (limit ' + fmtBytes(n.disk_free_limit) + ')' : '', n.disk_free_alarm ? h('strong', { class: 'error' }, ' ALARM') : ''] },
        { label: 'Raft', cell: (n) => n.raft ? `${n.raft.role}, term ${n.raft.term}, leader ${n.raft.leader}, ${n.raft.peers.length} peers` : 'single node' },
      ], ns, { testid: 'nodes-table' }));
      showAlarms(ns);
      fill(about, h('dl', { class: 'props' },
        h('dt', null, 'Cluster'), h('dd', null, o.cluster_name),
        h('dt', null, 'Product'), h('dd', null, (o.product_name || 'Warren') + ' ' + (o.product_version || '')),
        h('dt', null, 'RabbitMQ behaviour'), h('dd', null, o.rabbitmq_version),
        h('dt', null, 'Listeners'), h('dd', null, (o.listeners || []).map((l) => `${l.protocol} ${l.ip_address}:${l.port}`).join(', ') || 'none')));
    } };
  };

  function showAlarms(ns) {
    const a = [];
    for (const n of ns || []) {
      if (n.mem_alarm) a.push(`Memory alarm on ${n.name}: publishers are blocked.`);
      if (n.disk_free_alarm) a.push(`Disk alarm on ${n.name}: publishers are blocked.`);
    }
    const box = $('#alarms');
    box.hidden = !a.length;
    box.textContent = a.join(' ');
  }

  const queueCols = [
    { label: 'Virtual host', key: 'vhost', cell: (q) => q.vhost, narrow: true },
    { label: 'Name', key: 'name', cell: (q) => link(queueHref(q), q.name, 'queue-link') },
    { label: 'Type', key: 'type', cell: (q) => q.type, narrow: true },
    { label: 'Features', cell: (q) => features(q), narrow: true },
    { label: 'Policy', key: 'policy', cell: (q) => q.policy || '', narrow: true },
    { label: 'State', key: 'state', cell: (q) => q.state },
    { label: 'Ready', key: 'messages_ready', n: true, testid: 'queue-ready', cell: (q) => fmtNum(q.messages_ready) },
    { label: 'Unacked', key: 'messages_unacknowledged', n: true, testid: 'queue-unacked', cell: (q) => fmtNum(q.messages_unacknowledged) },
    { label: 'Total', key: 'messages', n: true, cell: (q) => fmtNum(q.messages), narrow: true },
    { label: 'Incoming', key: 'message_stats.publish_details.rate', n: true, cell: (q) => fmtRate(get(q, 'message_stats.publish_details')) },
    { label: 'Deliver / get', key: 'message_stats.deliver_get_details.rate', n: true, cell: (q) => fmtRate(get(q, 'message_stats.deliver_get_details')), narrow: true },
    { label: 'Ack', key: 'message_stats.ack_details.rate', n: true, cell: (q) => fmtRate(get(q, 'message_stats.ack_details')), narrow: true },
    { label: 'Consumers', key: 'consumers', n: true, cell: (q) => fmtNum(q.consumers) },
  ];

  pages.queues = (main) => {
    const box = h('div', { testid: 'queues' });
    const name = h('input', { required: true, testid: 'add-queue-name' });
    const type = h('select', { testid: 'add-queue-type' }, ['classic', 'quorum', 'stream'].map((t) => h('option', { value: t }, t)));
    const durable = h('input', { type: 'checkbox', checked: true, testid: 'add-queue-durable' });
    const args = h('textarea', { placeholder: '{"x-max-length": 1000}', testid: 'add-queue-arguments' });
    const vh = vhostSelect('add-queue-vhost');
    const addForm = form('Add a queue', 'add-queue', [['Virtual host', 'vhost', vh], ['Name', 'name', name], ['Type', 'type', type],
      ['Durable', 'durable', durable], ['Arguments', 'arguments', args]], 'Add queue', async (v) => {
      const a = parseJSONField(v.arguments, 'Arguments');
      if (v.type !== 'classic') a['x-queue-type'] = v.type;
      await api('PUT', 'queues/' + enc(v.vhost) + '/' + enc(v.name), { durable: v.durable, auto_delete: false, arguments: a });
      return 'Queue ' + v.name + ' declared.';
    });
    fill(main, h('h1', null, 'Queues'), box, addForm);
    const list = pagedList(box, { what: 'queues', path: 'queues', cols: queueCols, rowTestid: 'queue-row', empty: 'No queues.' });
    return { refresh: list.refresh, focusFilter: list.focusFilter };
  };

  pages.queue = (main, [vhost, qname]) => {
    const path = 'queues/' + enc(vhost) + '/' + enc(qname);
    const summary = h('div', { class: 'cards', testid: 'queue-summary' });
    const details = h('div', { class: 'box', testid: 'queue-details' });
    const depth = h('div', { class: 'chart', testid: 'chart-queue-depth' });
    const rates = h('div', { class: 'chart', testid: 'chart-queue-rates' });
    const consumers = h('div', { testid: 'queue-consumers' });
    const bindings = h('div', { testid: 'queue-bindings' });
    const unacked = h('div', { testid: 'queue-unacked-deliveries' });

    const ackmode = h('select', { testid: 'get-ackmode' },
      [['ack_requeue_true', 'Nack message, requeue'], ['reject_requeue_false', 'Reject, do not requeue'],
        ['ack_requeue_false', 'Automatic ack'], ['reject_requeue_true', 'Reject, requeue']].map(([v, l]) => h('option', { value: v }, l)));
    const encoding = h('select', { testid: 'get-encoding' }, [['auto', 'Auto string / base64'], ['base64', 'base64']].map(([v, l]) => h('option', { value: v }, l)));
    const count = h('input', { type: 'number', min: 1, max: 100, value: 1, testid: 'get-count' });
    const result = h('div', { testid: 'get-result', 'aria-live': 'polite' });
    const getForm = form('Get messages', 'get', [['Ack mode', 'ackmode', ackmode], ['Encoding', 'encoding', encoding], ['Messages', 'count', count]],
      'Get messages', async (v) => {
        const ms = await api('POST', path + '/get', { count: +v.count, ackmode: v.ackmode, encoding: v.encoding, truncate: 50000 });
        fill(result, ms.length ? ms.map((m, i) => h('div', { class: 'msg', testid: 'get-message' },
          h('strong', null, `Message ${i + 1}`), ` · exchange "${m.exchange}" · routing key "${m.routing_key}" · ${m.redelivered ? 'redelivered · ' : ''}${fmtNum(m.message_count)} left`,
          h('pre', { testid: 'get-payload' }, m.payload), m.payload_encoding !== 'string' ? h('p', { class: 'muted' }, 'Encoding: ' + m.payload_encoding) : null,
          propsList(m.properties))) : h('p', { class: 'muted', testid: 'get-empty' }, 'Queue is empty.'));
        return ms.length + ' message' + (ms.length === 1 ? '' : 's') + ' got.';
      });
    getForm.querySelector('button[type=submit]').dataset.testid = 'get-submit';
    getForm.append(result);

    const body = h('textarea', { testid: 'publish-body', 'aria-label': 'Payload' });
    const persistent = h('input', { type: 'checkbox', testid: 'publish-persistent' });
    const headers = h('textarea', { placeholder: '{"x-key": "value"}', testid: 'publish-headers' });
    const pubForm = form('Publish a message', 'publish', [['Persistent', 'persistent', persistent], ['Headers', 'headers', headers], ['Payload', 'payload', body]],
      'Publish message', async (v) => {
        const props = { delivery_mode: v.persistent ? 2 : 1, headers: parseJSONField(v.headers, 'Headers') };
        const r = await api('POST', 'exchanges/' + enc(vhost) + '/amq.default/publish', { routing_key: qname, payload: v.payload, payload_encoding: 'string', properties: props });
        return r.routed ? 'Message published.' : 'Message published, but not routed.';
      });
    pubForm.querySelector('button[type=submit]').dataset.testid = 'publish-submit';

    const bindEx = h('input', { required: true, testid: 'bind-exchange' });
    const bindKey = h('input', { testid: 'bind-routing-key' });
    const bindForm = form('Bind from an exchange', 'bind', [['Exchange', 'exchange', bindEx], ['Routing key', 'key', bindKey]], 'Bind', async (v) => {
      await api('POST', 'bindings/' + enc(vhost) + '/e/' + enc(v.exchange) + '/q/' + enc(qname), { routing_key: v.key, arguments: {} });
      return 'Bound.';
    });

    const move = moveMessages(vhost, qname);

    const actions = h('div', { class: 'toolbar' },
      confirmButton('Purge', 'queue-purge', async () => { await api('DELETE', path + '/contents'); toast('Queue purged.'); refreshNow(); }),
      confirmButton('Delete', 'queue-delete', async () => { await api('DELETE', path); toast('Queue deleted.'); location.hash = '#/queues'; }));

    fill(main, h('p', null, link('#/queues', '← Queues')), h('h1', { testid: 'queue-name' }, qname), h('p', { class: 'muted' }, 'Virtual host ' + vhost),
      summary, actions, h('div', { class: 'charts' }, depth, rates), details,
      h('h2', null, 'Consumers'), consumers, h('h2', null, 'Unacked deliveries'), unacked,
      h('h2', null, 'Bindings'), bindings, h('div', { class: 'grid2' }, getForm, pubForm, bindForm, isPolicymaker() ? move.form : null));

    return { async refresh() {
      let q;
      try {
        q = await api('GET', path + '?' + HISTORY);
      } catch (e) {
        if (e.status === 404) { fill(main, h('h1', null, qname), h('p', { class: 'error', role: 'alert', testid: 'not-found' }, 'This queue does not exist (any more).'), link('#/queues', 'All queues')); return; }
        throw e;
      }
      move.queueType(q.type);
      const ms = q.message_stats || {};
      const card = (k, v, id) => h('div', { class: 'card', testid: id }, h('div', { class: 'v' }, v), h('div', { class: 'k' }, k));
      fill(summary, card('Ready', fmtNum(q.messages_ready), 'queue-ready'), card('Unacked', fmtNum(q.messages_unacknowledged), 'queue-unacked'),
        card('Total', fmtNum(q.messages), 'queue-total'), card('Consumers', fmtNum(q.consumers), 'queue-consumer-count'),
        card('Incoming', fmtRate(ms.publish_details), 'queue-rate-publish'), card('Deliver / get', fmtRate(ms.deliver_get_details), 'queue-rate-deliver'),
        card('Memory', fmtBytes(q.memory), 'queue-memory'));
      lengthChart(depth, 'Queued messages', q, [['messages_ready', 'Ready'], ['messages_unacknowledged', 'Unacked']]);
      rateChart(rates, 'Message rates', ms, [['publish', 'Publish'], ['deliver_get', 'Deliver / get'], ['ack', 'Ack'], ['redeliver', 'Redelivered']]);
      fill(details, h('dl', { class: 'props' },
        h('dt', null, 'Type'), h('dd', null, q.type), h('dt', null, 'State'), h('dd', null, q.state),
        h('dt', null, 'Features'), h('dd', null, features(q)), h('dt', null, 'Policy'), h('dd', null, q.policy || 'none'),
        h('dt', null, 'Operator policy'), h('dd', null, q.operator_policy || 'none'),
        h('dt', null, 'Effective policy'), h('dd', null, propsList(q.effective_policy_definition)),
        h('dt', null, 'Arguments'), h('dd', null, propsList(q.arguments)), h('dt', null, 'Node'), h('dd', null, q.node)));
      fill(consumers, table([
        { label: 'Tag', cell: (c) => c.consumer_tag },
        { label: 'Channel', cell: (c) => c.channel_details ? link(connHref(c.channel_details.connection_name), c.channel_details.name) : '' },
        { label: 'Ack required', cell: (c) => c.ack_required ? 'yes' : 'no' },
        { label: 'Exclusive', cell: (c) => c.exclusive ? 'yes' : 'no' },
        { label: 'Prefetch', n: true, cell: (c) => fmtNum(c.prefetch_count) },
      ], q.consumer_details || [], { testid: 'consumers-table', empty: 'No consumers.' }));
      const [bs, us] = await Promise.all([api('GET', path + '/bindings').catch(() => []), api('GET', path + '/unacked').catch(() => null)]);
      fill(bindings, table([
        { label: 'From', cell: (b) => b.source === '' ? '(default exchange)' : link(exchangeHref({ vhost, name: b.source }), b.source) },
        { label: 'Routing key', cell: (b) => b.routing_key },
        { label: 'Arguments', cell: (b) => propsList(b.arguments) },
        { label: '', cell: (b) => b.source === '' ? '' : confirmButton('Unbind', 'unbind', async () => {
          await api('DELETE', 'bindings/' + enc(vhost) + '/e/' + enc(b.source) + '/q/' + enc(qname) + '/' + enc(b.properties_key));
          toast('Unbound.'); refreshNow();
        }, b.source + '/q/' + qname + '/' + b.properties_key) },
      ], bs, { testid: 'bindings-table' }));
      if (us === null) fill(unacked, h('p', { class: 'muted' }, 'Not available.'));
      else fill(unacked, table([
        { label: 'Channel', cell: (u) => link(connHref(u.channel_details.connection_name), u.channel_details.name) },
        { label: 'User', cell: (u) => u.channel_details.user, narrow: true },
        { label: 'Consumer', cell: (u) => u.consumer_tag || '(basic.get)' },
        { label: 'Delivery tag', n: true, cell: (u) => u.delivery_tag },
        { label: 'Age', n: true, cell: (u) => fmtAge(u.age_ms) },
        { label: 'Deliveries', n: true, cell: (u) => u.delivery_count, narrow: true },
        { label: 'Message id', cell: (u) => u.message_id, narrow: true },
        { label: 'Size', n: true, cell: (u) => fmtBytes(u.payload_bytes), narrow: true },
      ], us.slice(0, 200), { testid: 'unacked-table', rowTestid: 'unacked-row', empty: 'No unacked deliveries.' }));
    } };
  };

  // sessionUser returns the user and password this tab logged in with.
  function sessionUser() {
    const up = decodeURIComponent(escape(atob(state.auth || '')));
    const i = up.indexOf(':');
    return { user: up.slice(0, i), password: up.slice(i + 1) };
  }

  // localURI is a shovel URI naming this broker's vhost (no host: the
  // broker's in-process door) and the logged-in user, whom the shovel's
  // connections log in as. RabbitMQ's UI writes amqp:///vhost and its
  // shovel logs in as a trusted internal user; Warren's local shovels log
  // in as the user the URI names.
  function localURI(vhost) {
    const u = sessionUser();
    return 'amqp://' + enc(u.user) + ':' + enc(u.password) + '@/' + enc(vhost);
  }

  // moveMessages is RabbitMQ's "Move messages" (queue.ejs with
  // rabbitmq_shovel_management's shovel.js): it stores a shovel named
  // "Move from <queue>" that moves the queue's length (src-delete-after
  // queue-length, on-confirm, prefetch 1000) to a queue of this vhost
  // or, when a URI is given, of another broker, then deletes itself.
  // While it runs the form shows the shovel's counts from api/shovels,
  // polled every second. From a stream it reads from the first offset
  // (src-consumer-args x-stream-offset first, as RabbitMQ's form sets),
  // which copies the stream: a stream keeps what it was read.
  function moveMessages(vhost, qname) {
    const name = 'Move from ' + qname;
    const dest = h('input', { required: true, testid: 'move-dest-queue' });
    const uri = h('input', { placeholder: 'this broker', testid: 'move-dest-uri', autocomplete: 'off' });
    const progress = h('div', { class: 'status', role: 'status', 'aria-live': 'polite', testid: 'move-progress' });
    const f = form('Move messages', 'move', [['Destination queue', 'dest', dest], ['Destination URI', 'uri', uri]], 'Move messages', async (v) => {
      const local = localURI(vhost);
      await api('PUT', 'parameters/shovel/' + enc(vhost) + '/' + enc(name), { component: 'shovel', vhost, name, value: {
        'src-protocol': 'amqp091', 'src-uri': local, 'src-queue': qname, 'src-prefetch-count': 1000,
        'src-delete-after': 'queue-length', 'dest-protocol': 'amqp091', 'dest-uri': v.uri.trim() || local,
        'dest-queue': v.dest, 'dest-add-forward-headers': false, 'ack-mode': 'on-confirm',
        'src-consumer-args': isStream ? { 'x-stream-offset': 'first' } : {},
      } });
      watch(v.dest);
      return 'Shovel "' + name + '" created.';
    });
    f.insertBefore(h('p', { class: 'muted' }, 'A temporary shovel moves the messages this queue holds now, on-confirm (nothing is lost), then deletes itself.'), f.children[1]);
    f.append(progress);
    let last = null, timer = 0, isStream = false;
    // gone reports that the shovel's parameter no longer exists: a
    // finished move deletes its own.
    const gone = async () => {
      try { await api('GET', 'parameters/shovel/' + enc(vhost) + '/' + enc(name)); return false; } catch (e) {
        if (e.status === 404) return true;
        throw e;
      }
    };
    // watch polls the shovel until it is gone or the page is left.
    async function watch(destQueue) {
      clearTimeout(timer);
      last = null;
      progress.dataset.state = 'starting';
      fill(progress, 'Moving to ' + destQueue + ': waiting for the shovel to start.');
      const tick = async () => {
        if (!f.isConnected) return;
        try {
          const links = await api('GET', 'shovels/' + enc(vhost));
          const l = links.find((x) => x.name === name);
          if (l) {
            last = l;
            const fwd = l.messages_forwarded || 0, rem = l.messages_remaining;
            progress.dataset.state = l.state;
            progress.dataset.forwarded = fwd;
            if (rem !== undefined) progress.dataset.remaining = rem;
            fill(progress, l.state === 'running' ?
              `Moving to ${destQueue}: ${fmtNum(fwd)}${rem === undefined ? '' : ' of ' + fmtNum(fwd + rem)} moved, ${fmtNum(rem)} remaining.` :
              [`Shovel ${l.state}`, l.reason ? h('pre', { testid: 'move-reason' }, l.reason) : '']);
          } else if (await gone()) {
            const total = last && last.messages_remaining !== undefined ? last.messages_forwarded + last.messages_remaining : null;
            progress.dataset.state = 'done';
            if (total !== null) progress.dataset.forwarded = total;
            progress.dataset.remaining = 0;
            fill(progress, total === null ? 'Done: the shovel moved the messages to ' + destQueue + ' and deleted itself.' :
              `Done: ${fmtNum(total)} message${total === 1 ? '' : 's'} moved to ${destQueue}; the shovel deleted itself.`);
            refreshNow();
            return;
          }
        } catch (e) {
          fill(progress, h('span', { class: 'error' }, e.message));
        }
        timer = setTimeout(tick, 1000);
      };
      tick();
    }
    return { form: f, queueType: (t) => { isStream = t === 'stream'; } };
  }

  pages.exchanges = (main) => {
    const box = h('div', { testid: 'exchanges' });
    const name = h('input', { required: true, testid: 'add-exchange-name' });
    const type = h('select', { testid: 'add-exchange-type' }, ['direct', 'fanout', 'topic', 'headers'].map((t) => h('option', { value: t }, t)));
    const durable = h('input', { type: 'checkbox', checked: true, testid: 'add-exchange-durable' });
    const vh = vhostSelect('add-exchange-vhost');
    const addForm = form('Add an exchange', 'add-exchange', [['Virtual host', 'vhost', vh], ['Name', 'name', name], ['Type', 'type', type], ['Durable', 'durable', durable]],
      'Add exchange', async (v) => {
        await api('PUT', 'exchanges/' + enc(v.vhost) + '/' + enc(v.name), { type: v.type, durable: v.durable, auto_delete: false, internal: false, arguments: {} });
        return 'Exchange ' + v.name + ' declared.';
      });
    fill(main, h('h1', null, 'Exchanges'), box, addForm);
    const list = pagedList(box, { what: 'exchanges', path: 'exchanges', rowTestid: 'exchange-row', cols: [
      { label: 'Virtual host', key: 'vhost', cell: (x) => x.vhost, narrow: true },
      { label: 'Name', key: 'name', cell: (x) => link(exchangeHref(x), x.name || '(AMQP default)', 'exchange-link') },
      { label: 'Type', key: 'type', cell: (x) => x.type },
      { label: 'Features', cell: (x) => features(x), narrow: true },
      { label: 'Policy', key: 'policy', cell: (x) => x.policy || '', narrow: true },
      { label: 'In', key: 'message_stats.publish_in_details.rate', n: true, cell: (x) => fmtRate(get(x, 'message_stats.publish_in_details')) },
      { label: 'Out', key: 'message_stats.publish_out_details.rate', n: true, cell: (x) => fmtRate(get(x, 'message_stats.publish_out_details')) },
    ] });
    return { refresh: list.refresh, focusFilter: list.focusFilter };
  };

  pages.exchange = (main, [vhost, xname]) => {
    const path = 'exchanges/' + enc(vhost) + '/' + enc(xname);
    const name = xname === 'amq.default' ? '' : xname;
    const details = h('div', { class: 'box', testid: 'exchange-details' });
    const from = h('div', { testid: 'exchange-bindings-from' });
    const to = h('div', { testid: 'exchange-bindings-to' });
    const destType = h('select', { testid: 'bind-dest-type' }, [['q', 'To queue'], ['e', 'To exchange']].map(([v, l]) => h('option', { value: v }, l)));
    const dest = h('input', { required: true, testid: 'bind-destination' });
    const key = h('input', { testid: 'bind-routing-key' });
    const bindForm = form('Add a binding from this exchange', 'bind', [['Destination', 'type', destType], ['Name', 'dest', dest], ['Routing key', 'key', key]], 'Bind', async (v) => {
      await api('POST', 'bindings/' + enc(vhost) + '/e/' + enc(xname) + '/' + v.type + '/' + enc(v.dest), { routing_key: v.key, arguments: {} });
      return 'Bound.';
    });
    const rk = h('input', { testid: 'publish-routing-key' });
    const body = h('textarea', { testid: 'publish-body' });
    const persistent = h('input', { type: 'checkbox', testid: 'publish-persistent' });
    const pubForm = form('Publish a message', 'publish', [['Routing key', 'key', rk], ['Persistent', 'persistent', persistent], ['Payload', 'payload', body]], 'Publish message', async (v) => {
      const r = await api('POST', path + '/publish', { routing_key: v.key, payload: v.payload, payload_encoding: 'string', properties: { delivery_mode: v.persistent ? 2 : 1 } });
      return r.routed ? 'Message published.' : 'Message published, but not routed.';
    });
    pubForm.querySelector('button[type=submit]').dataset.testid = 'publish-submit';
    const builtin = name === '' || name.startsWith('amq.');
    fill(main, h('p', null, link('#/exchanges', '← Exchanges')), h('h1', { testid: 'exchange-name' }, name || '(AMQP default)'), h('p', { class: 'muted' }, 'Virtual host ' + vhost),
      builtin ? null : h('div', { class: 'toolbar' }, confirmButton('Delete', 'exchange-delete', async () => { await api('DELETE', path); toast('Exchange deleted.'); location.hash = '#/exchanges'; })),
      details, h('h2', null, 'Bindings from this exchange'), from, h('h2', null, 'Bindings to this exchange'), to,
      h('div', { class: 'grid2' }, name === '' ? null : bindForm, pubForm));
    const bcols = (end) => [
      { label: end === 'destination' ? 'To' : 'From', cell: (b) => end === 'destination' ?
        link(b.destination_type === 'queue' ? queueHref({ vhost, name: b.destination }) : exchangeHref({ vhost, name: b.destination }), b.destination) :
        link(exchangeHref({ vhost, name: b.source }), b.source) },
      { label: 'Routing key', cell: (b) => b.routing_key },
      { label: 'Arguments', cell: (b) => propsList(b.arguments) },
      { label: '', cell: (b) => confirmButton('Unbind', 'unbind', async () => {
        await api('DELETE', 'bindings/' + enc(vhost) + '/e/' + enc(b.source) + '/' + (b.destination_type === 'queue' ? 'q' : 'e') + '/' + enc(b.destination) + '/' + enc(b.properties_key));
        toast('Unbound.'); refreshNow();
      }, b.source + '/' + b.destination_type + '/' + b.destination + '/' + b.properties_key) },
    ];
    return { async refresh() {
      const [x, bs] = await Promise.all([api('GET', path), name === '' ? [] : api('GET', 'bindings/' + enc(vhost))]);
      fill(details, h('dl', { class: 'props' }, h('dt', null, 'Type'), h('dd', null, x.type), h('dt', null, 'Features'), h('dd', null, features(x)),
        h('dt', null, 'Policy'), h('dd', null, x.policy || 'none'), h('dt', null, 'Arguments'), h('dd', null, propsList(x.arguments))));
      if (name === '') {
        fill(from, h('p', { class: 'muted' }, 'The default exchange routes to the queue named by the routing key; it has no other bindings.'));
        fill(to);
        return;
      }
      fill(from, table(bcols('destination'), bs.filter((b) => b.source === name), { testid: 'bindings-from-table' }));
      fill(to, table(bcols('source'), bs.filter((b) => b.destination_type === 'exchange' && b.destination === name), { testid: 'bindings-to-table' }));
    } };
  };

  const clientName = (c) => {
    const p = c.client_properties || {};
    return [p.product, p.version].filter(Boolean).join(' ') || '–';
  };

  pages.connections = (main) => {
    const box = h('div', { testid: 'connections' });
    fill(main, h('h1', null, 'Connections'), box);
    const list = pagedList(box, { what: 'connections', path: 'connections', rowTestid: 'connection-row', empty: 'No connections.', cols: [
      { label: 'Name', key: 'name', cell: (c) => link(connHref(c.name), c.user_provided_name ? c.user_provided_name + ' (' + c.name + ')' : c.name, 'connection-link') },
      { label: 'User', key: 'user', cell: (c) => c.user },
      { label: 'Virtual host', key: 'vhost', cell: (c) => c.vhost, narrow: true },
      { label: 'State', key: 'state', cell: (c) => c.state },
      { label: 'Client', cell: clientName, narrow: true },
      { label: 'Protocol', key: 'protocol', cell: (c) => c.protocol, narrow: true },
      { label: 'Channels', key: 'channels', n: true, cell: (c) => fmtNum(c.channels) },
      { label: 'Received', key: 'recv_oct', n: true, cell: (c) => c.recv_oct_details ? fmtRate(c.recv_oct_details) : fmtBytes(c.recv_oct), narrow: true },
      { label: 'Sent', key: 'send_oct', n: true, cell: (c) => c.send_oct_details ? fmtRate(c.send_oct_details) : fmtBytes(c.send_oct), narrow: true },
    ] });
    return { refresh: list.refresh, focusFilter: list.focusFilter };
  };

  const channelCols = [
    { label: 'Channel', key: 'name', cell: (c) => link(connHref(c.connection_details.name), c.name, 'channel-link') },
    { label: 'User', key: 'user', cell: (c) => c.user, narrow: true },
    { label: 'Virtual host', key: 'vhost', cell: (c) => c.vhost, narrow: true },
    { label: 'Mode', cell: (c) => [c.confirm && 'confirm', c.transactional && 'transactional'].filter(Boolean).join(', ') || '–', narrow: true },
    { label: 'Prefetch', key: 'prefetch_count', n: true, testid: 'channel-prefetch', cell: (c) => fmtNum(c.prefetch_count) },
    { label: 'Unacked', key: 'messages_unacknowledged', n: true, testid: 'channel-unacked', cell: (c) => fmtNum(c.messages_unacknowledged) },
    { label: 'Unconfirmed', key: 'messages_unconfirmed', n: true, cell: (c) => fmtNum(c.messages_unconfirmed), narrow: true },
    { label: 'Consumers', key: 'consumer_count', n: true, cell: (c) => fmtNum(c.consumer_count) },
    { label: 'Publish', n: true, cell: (c) => fmtRate(get(c, 'message_stats.publish_details')) },
    { label: 'Deliver / get', n: true, cell: (c) => fmtRate(get(c, 'message_stats.deliver_get_details')), narrow: true },
    { label: 'Ack', n: true, cell: (c) => fmtRate(get(c, 'message_stats.ack_details')), narrow: true },
  ];

  pages.channels = (main) => {
    const box = h('div', { testid: 'channels' });
    fill(main, h('h1', null, 'Channels'), box);
    const list = pagedList(box, { what: 'channels', path: 'channels', rowTestid: 'channel-row', empty: 'No channels.', cols: channelCols });
    return { refresh: list.refresh, focusFilter: list.focusFilter };
  };

  pages.connection = (main, [name]) => {
    const path = 'connections/' + enc(name);
    const details = h('div', { class: 'box', testid: 'connection-details' });
    const client = h('div', { class: 'box', testid: 'connection-client' });
    const chans = h('div', { testid: 'connection-channels' });
    const reason = h('input', { value: 'Closed via the Warren console', testid: 'close-reason', 'aria-label': 'Reason' });
    fill(main, h('p', null, link('#/connections', '← Connections')), h('h1', { testid: 'connection-name' }, name),
      h('div', { class: 'toolbar' }, reason, confirmButton('Close connection', 'connection-close', async () => {
        await api('DELETE', path, undefined, { 'X-Reason': reason.value });
        toast('Connection closed.');
        location.hash = '#/connections';
      })),
      h('div', { class: 'grid2' }, details, client), h('h2', null, 'Channels'), chans);
    return { async refresh() {
      let c;
      try { c = await api('GET', path); } catch (e) {
        if (e.status === 404) { fill(main, h('h1', null, name), h('p', { class: 'error', role: 'alert', testid: 'not-found' }, 'This connection is closed.'), link('#/connections', 'All connections')); return; }
        throw e;
      }
      fill(details, h('dl', { class: 'props' },
        h('dt', null, 'User'), h('dd', null, c.user), h('dt', null, 'Virtual host'), h('dd', null, c.vhost),
        h('dt', null, 'State'), h('dd', null, c.state), h('dt', null, 'Protocol'), h('dd', null, c.protocol),
        h('dt', null, 'Peer'), h('dd', null, c.peer_host + ':' + c.peer_port),
        h('dt', null, 'Connected'), h('dd', null, c.connected_at ? new Date(c.connected_at).toLocaleString() : '–'),
        h('dt', null, 'Heartbeat'), h('dd', null, c.timeout === undefined ? '–' : c.timeout + ' s'),
        h('dt', null, 'Frame max'), h('dd', null, fmtNum(c.frame_max)), h('dt', null, 'Channel max'), h('dd', null, fmtNum(c.channel_max)),
        h('dt', null, 'Received / sent'), h('dd', null, fmtBytes(c.recv_oct) + ' / ' + fmtBytes(c.send_oct))));
      fill(client, h('h2', null, 'Client properties'), propsList(c.client_properties));
      const chs = await api('GET', path + '/channels');
      fill(chans, table(channelCols, chs, { testid: 'channels-table', rowTestid: 'channel-row', empty: 'No channels.' }));
    } };
  };

  // adminPage renders lists that only some tags may see, one section
  // each ({heading, what, load, cols, forms}; the first without a
  // heading), each with its forms below it: the API's 401 or 403 for any
  // of them becomes the "access refused" panel.
  function adminPage(main, title, sections) {
    const boxes = sections.map((sec) => h('div', { testid: sec.what }));
    fill(main, h('h1', null, title), sections.map((sec, i) => [sec.heading ? h('h2', null, sec.heading) : null, boxes[i],
      h('div', { class: 'grid2 forms' }, sec.forms || [])]));
    return { async refresh() {
      let rows;
      try { rows = await Promise.all(sections.map((sec) => sec.load())); } catch (e) {
        if (e.denied) { denied(main, e, title); return; }
        throw e;
      }
      sections.forEach((sec, i) => fill(boxes[i], table(sec.cols, rows[i], { testid: sec.what + '-table',
        rowTestid: sec.row || sec.what.replace(/ies$/, 'y').replace(/s$/, '') + '-row', empty: sec.empty })));
    } };
  }
  function adminList(main, title, what, load, cols, forms) {
    return adminPage(main, title, [{ what, load, cols, forms }]);
  }

  pages.vhosts = (main) => {
    const name = h('input', { required: true, testid: 'add-vhost-name' });
    return adminList(main, 'Virtual hosts', 'vhosts', () => api('GET', 'vhosts'), [
      { label: 'Name', cell: (v) => v.name },
      { label: 'Ready', n: true, cell: (v) => fmtNum(v.messages_ready) },
      { label: 'Unacked', n: true, cell: (v) => fmtNum(v.messages_unacknowledged) },
      { label: 'Total', n: true, cell: (v) => fmtNum(v.messages) },
      { label: 'Publish', n: true, cell: (v) => fmtRate(get(v, 'message_stats.publish_details')), narrow: true },
      { label: 'Deliver / get', n: true, cell: (v) => fmtRate(get(v, 'message_stats.deliver_get_details')), narrow: true },
      { label: '', cell: (v) => confirmButton('Delete', 'vhost-delete', async () => { await api('DELETE', 'vhosts/' + enc(v.name)); toast('Virtual host deleted.'); refreshNow(); }, v.name) },
    ], [form('Add a virtual host', 'add-vhost', [['Name', 'name', name]], 'Add virtual host', async (v) => {
      await api('PUT', 'vhosts/' + enc(v.name), {});
      return 'Virtual host ' + v.name + ' added.';
    })]);
  };

  pages.users = (main) => {
    const name = h('input', { required: true, testid: 'add-user-name', autocomplete: 'off' });
    const pass = h('input', { type: 'password', testid: 'add-user-password', autocomplete: 'new-password' });
    const tags = h('input', { placeholder: 'administrator, monitoring, management, policymaker', testid: 'add-user-tags' });
    return adminList(main, 'Users', 'users', () => api('GET', 'users'), [
      { label: 'Name', cell: (u) => u.name },
      { label: 'Tags', cell: (u) => (Array.isArray(u.tags) ? u.tags : String(u.tags || '').split(',')).filter(Boolean).map((t) => h('span', { class: 'tag' }, t)) },
      { label: 'Password', cell: (u) => u.password_hash ? 'set' : 'none', narrow: true },
      { label: '', cell: (u) => u.name === state.user ? '' : confirmButton('Delete', 'user-delete', async () => { await api('DELETE', 'users/' + enc(u.name)); toast('User deleted.'); refreshNow(); }, u.name) },
    ], [form('Add or update a user', 'add-user', [['Name', 'name', name], ['Password', 'password', pass], ['Tags', 'tags', tags]], 'Save user', async (v) => {
      const body = { tags: v.tags.split(',').map((t) => t.trim()).filter(Boolean).join(',') };
      if (v.password) body.password = v.password;
      else {
        // Keep an existing user's password when only its tags change.
        const old = await api('GET', 'users/' + enc(v.name)).catch(() => null);
        body.password_hash = old ? old.password_hash : '';
        if (old && old.hashing_algorithm) body.hashing_algorithm = old.hashing_algorithm;
      }
      await api('PUT', 'users/' + enc(v.name), body);
      return 'User ' + v.name + ' saved.';
    })]);
  };

  pages.permissions = (main) => {
    const user = h('input', { required: true, testid: 'perm-user' });
    const vh = vhostSelect('perm-vhost');
    const conf = h('input', { value: '.*', testid: 'perm-configure' });
    const write = h('input', { value: '.*', testid: 'perm-write' });
    const read = h('input', { value: '.*', testid: 'perm-read' });
    const tUser = h('input', { required: true, testid: 'topic-user' });
    const tVh = vhostSelect('topic-vhost');
    const tExchange = h('input', { required: true, value: 'amq.topic', testid: 'topic-exchange' });
    const tWrite = h('input', { value: '.*', testid: 'topic-write' });
    const tRead = h('input', { value: '.*', testid: 'topic-read' });
    return adminPage(main, 'Permissions', [{
      what: 'permissions', load: () => api('GET', 'permissions'), cols: [
        { label: 'User', cell: (p) => p.user }, { label: 'Virtual host', cell: (p) => p.vhost },
        { label: 'Configure', cell: (p) => h('code', null, p.configure) }, { label: 'Write', cell: (p) => h('code', null, p.write) },
        { label: 'Read', cell: (p) => h('code', null, p.read) },
        { label: '', cell: (p) => confirmButton('Clear', 'permission-delete', async () => { await api('DELETE', 'permissions/' + enc(p.vhost) + '/' + enc(p.user)); toast('Permissions cleared.'); refreshNow(); }, p.vhost + '/' + p.user) },
      ], forms: [form('Set permissions', 'set-permission', [['User', 'user', user], ['Virtual host', 'vhost', vh], ['Configure', 'configure', conf], ['Write', 'write', write], ['Read', 'read', read]],
        'Set permissions', async (v) => {
          await api('PUT', 'permissions/' + enc(v.vhost) + '/' + enc(v.user), { configure: v.configure, write: v.write, read: v.read });
          return 'Permissions set.';
        })],
    }, {
      // RabbitMQ's topic permissions: which routing keys a user may
      // publish with (write) and bind with (read) on a topic exchange.
      heading: 'Topic permissions', what: 'topic-permissions', row: 'topic-permission-row', empty: 'No topic permissions.',
      load: () => api('GET', 'topic-permissions'), cols: [
        { label: 'User', cell: (p) => p.user }, { label: 'Virtual host', cell: (p) => p.vhost },
        { label: 'Exchange', cell: (p) => p.exchange },
        { label: 'Write', cell: (p) => h('code', null, p.write) }, { label: 'Read', cell: (p) => h('code', null, p.read) },
        { label: '', cell: (p) => confirmButton('Clear', 'topic-permission-delete', async () => {
          await api('DELETE', 'topic-permissions/' + enc(p.vhost) + '/' + enc(p.user));
          toast('Topic permissions of ' + p.user + ' on ' + p.vhost + ' cleared.'); refreshNow();
        }, p.vhost + '/' + p.user + '/' + p.exchange) },
      ], forms: [form('Set a topic permission', 'set-topic-permission', [['User', 'user', tUser], ['Virtual host', 'vhost', tVh], ['Exchange', 'exchange', tExchange],
        ['Write', 'write', tWrite], ['Read', 'read', tRead]], 'Set topic permission', async (v) => {
        await api('PUT', 'topic-permissions/' + enc(v.vhost) + '/' + enc(v.user), { exchange: v.exchange, write: v.write, read: v.read });
        return 'Topic permission set.';
      })],
    }]);
  };

  pages.policies = (main) => {
    const vh = vhostSelect('policy-vhost');
    const name = h('input', { required: true, testid: 'policy-name' });
    const pattern = h('input', { required: true, value: '^', testid: 'policy-pattern' });
    const applyTo = h('select', { testid: 'policy-apply-to' }, ['all', 'queues', 'exchanges', 'classic_queues', 'quorum_queues', 'streams'].map((t) => h('option', { value: t }, t)));
    const priority = h('input', { type: 'number', value: 0, testid: 'policy-priority' });
    const def = h('textarea', { required: true, placeholder: '{"max-length": 1000}', testid: 'policy-definition' });
    return adminList(main, 'Policies', 'policies', () => api('GET', 'policies'), [
      { label: 'Virtual host', cell: (p) => p.vhost }, { label: 'Name', cell: (p) => p.name },
      { label: 'Pattern', cell: (p) => h('code', null, p.pattern) }, { label: 'Apply to', cell: (p) => p['apply-to'] },
      { label: 'Definition', cell: (p) => propsList(p.definition) }, { label: 'Priority', n: true, cell: (p) => p.priority },
      { label: '', cell: (p) => confirmButton('Delete', 'policy-delete', async () => { await api('DELETE', 'policies/' + enc(p.vhost) + '/' + enc(p.name)); toast('Policy deleted.'); refreshNow(); }, p.vhost + '/' + p.name) },
    ], [form('Add or update a policy', 'add-policy', [['Virtual host', 'vhost', vh], ['Name', 'name', name], ['Pattern', 'pattern', pattern], ['Apply to', 'applyTo', applyTo],
      ['Priority', 'priority', priority], ['Definition', 'definition', def]], 'Save policy', async (v) => {
      await api('PUT', 'policies/' + enc(v.vhost) + '/' + enc(v.name), { pattern: v.pattern, 'apply-to': v.applyTo, priority: +v.priority, definition: parseJSONField(v.definition, 'Definition') });
      return 'Policy ' + v.name + ' saved.';
    })]);
  };

  // limits lists every vhost's limits (RabbitMQ's max-connections and
  // max-queues), one row per limit.
  pages.limits = (main) => {
    const vh = vhostSelect('limit-vhost');
    const name = h('select', { testid: 'limit-name' }, ['max-connections', 'max-queues'].map((n) => h('option', { value: n }, n)));
    const value = h('input', { type: 'number', required: true, step: 'any', testid: 'limit-value' });
    return adminPage(main, 'Virtual host limits', [{
      what: 'limits', empty: 'No limits.',
      load: async () => (await api('GET', 'vhost-limits')).flatMap((l) => Object.entries(l.value || {}).map(([n, v]) => ({ vhost: l.vhost, name: n, value: v }))),
      cols: [
        { label: 'Virtual host', cell: (l) => l.vhost }, { label: 'Limit', cell: (l) => l.name },
        { label: 'Value', n: true, cell: (l) => l.value < 0 ? 'none' : fmtNum(l.value) },
        { label: '', cell: (l) => confirmButton('Clear', 'limit-delete', async () => {
          await api('DELETE', 'vhost-limits/' + enc(l.vhost) + '/' + enc(l.name));
          toast('Limit ' + l.name + ' on ' + l.vhost + ' cleared.'); refreshNow();
        }, l.vhost + '/' + l.name) },
      ],
      forms: [form('Set a limit', 'set-limit', [['Virtual host', 'vhost', vh], ['Limit', 'name', name], ['Value', 'value', value]], 'Set limit', async (v) => {
        if (!/^-?\d+$/.test(v.value)) throw new Error('Value must be a whole number (negative: no limit).');
        await api('PUT', 'vhost-limits/' + enc(v.vhost) + '/' + enc(v.name), { value: +v.value });
        return 'Limit ' + v.name + ' on ' + v.vhost + ' set to ' + v.value + '.';
      })],
    }]);
  };

  // definitions exports the broker's definitions as a file (GET
  // api/definitions) and imports one (POST, as JSON: the API takes no
  // other type from a page).
  pages.definitions = (main) => {
    const filename = h('input', { testid: 'definitions-filename', 'aria-label': 'File name' });
    const exportStatus = h('p', { class: 'status', role: 'status', testid: 'definitions-export-status' });
    const download = h('a', { hidden: true, testid: 'definitions-download' });
    const count = (d, k) => (Array.isArray(d[k]) ? d[k].length : 0);
    const summary = (d) => ['users', 'vhosts', 'permissions', 'topic_permissions', 'policies', 'queues', 'exchanges', 'bindings']
      .map((k) => fmtNum(count(d, k)) + ' ' + k.replace('_', ' ')).join(', ');
    const exportBox = h('div', { class: 'box', testid: 'definitions-export' }, h('h2', null, 'Export definitions'),
      h('p', null, 'Users with their password hashes, virtual hosts, permissions, policies, exchanges, queues and bindings, in RabbitMQ\'s format.'),
      field('File name', filename),
      h('p', null, h('button', { type: 'button', testid: 'definitions-export-submit', onclick: async () => {
        exportStatus.textContent = '';
        exportStatus.classList.remove('error');
        try {
          const d = await api('GET', 'definitions');
          const url = URL.createObjectURL(new Blob([JSON.stringify(d, null, 2) + '\n'], { type: 'application/json' }));
          download.href = url;
          download.download = filename.value || 'definitions.json';
          download.click();
          setTimeout(() => URL.revokeObjectURL(url), 60000);
          exportStatus.textContent = 'Exported ' + summary(d) + '.';
        } catch (e) {
          exportStatus.textContent = e.message;
          exportStatus.classList.add('error');
        }
      } }, 'Download definitions')), exportStatus, download);
    const file = h('input', { type: 'file', accept: '.json,application/json', testid: 'definitions-file' });
    const text = h('textarea', { placeholder: '{"queues": [...]}', testid: 'definitions-text' });
    const importForm = form('Import definitions', 'definitions-import', [['File', 'file', file], ['Or paste', 'text', text]], 'Import definitions', async (v) => {
      const body = file.files.length ? await file.files[0].text() : v.text;
      if (!body.trim()) throw new Error('Choose a file or paste definitions.');
      let d;
      try { d = JSON.parse(body); } catch (e) { throw new Error('Not JSON: ' + e.message); }
      await api('POST', 'definitions', new RawJSON(body));
      file.value = '';
      return 'Imported ' + summary(d) + '.';
    });
    fill(main, h('h1', null, 'Definitions'), h('div', { class: 'grid2' }, exportBox, importForm));
    // The page has nothing to refresh: it asks once for the cluster's
    // name (the file name) and whether the user may use it (a user's own
    // record, which only an administrator may read, as the export).
    let asked = false;
    return { async refresh() {
      if (asked) return;
      try {
        const [o] = await Promise.all([api('GET', 'overview'), api('GET', 'users/' + enc(state.user))]);
        asked = true;
        // RabbitMQ's UI names it rabbit_<host>_<date>.json.
        if (!filename.value) filename.value = String(o.cluster_name || 'warren').replace(/[^A-Za-z0-9_.-]+/g, '_') + '_' + new Date().toISOString().slice(0, 10) + '.json';
      } catch (e) {
        if (e.denied) { denied(main, e, 'Definitions'); return; }
        throw e;
      }
    } };
  };

  // endpoint shows a shovel's source or destination as RabbitMQ's
  // fmt_shovel_endpoint does: a queue, or an exchange with its routing
  // key ("as published" when the destination keeps the message's).
  function endpoint(l, prefix) {
    if (l[prefix + 'queue']) return [h('code', null, l[prefix + 'queue']), h('sub', null, ' queue')];
    const x = l[prefix + 'exchange'], k = l[prefix + 'exchange_key'];
    return [x === undefined ? h('i', null, 'as published') : h('code', null, x), k ? [' : ', h('code', null, k)] : '', h('sub', null, ' exchange')];
  }
  const stateTag = (st) => h('span', { class: 'state ' + (st === 'running' ? 'ok' : st === 'starting' ? 'warn' : 'bad'), testid: 'link-state' }, st);

  // shovels lists the running shovels (api/shovels: RabbitMQ's Shovel
  // Status, with Warren's forwarded and remaining counts), restarts and
  // deletes them, and adds one (a shovel runtime parameter, as
  // RabbitMQ's Shovel Management does).
  pages.shovels = (main) => {
    const vh = vhostSelect('shovel-vhost');
    const name = h('input', { required: true, testid: 'shovel-name' });
    const kind = (testid) => h('select', { testid }, [['queue', 'Queue'], ['exchange', 'Exchange']].map(([v, l]) => h('option', { value: v }, l)));
    const srcURI = h('input', { placeholder: 'this broker', testid: 'shovel-src-uri', autocomplete: 'off' });
    const srcKind = kind('shovel-src-type');
    const src = h('input', { required: true, testid: 'shovel-src' });
    const srcKey = h('input', { placeholder: 'exchange only', testid: 'shovel-src-key' });
    const destURI = h('input', { placeholder: 'this broker', testid: 'shovel-dest-uri', autocomplete: 'off' });
    const destKind = kind('shovel-dest-type');
    const dest = h('input', { testid: 'shovel-dest', placeholder: 'empty: the message\'s own exchange and key' });
    const destKey = h('input', { placeholder: 'exchange only; empty keeps the message\'s', testid: 'shovel-dest-key' });
    const ack = h('select', { testid: 'shovel-ack-mode' }, ['on-confirm', 'on-publish', 'no-ack'].map((m) => h('option', { value: m }, m)));
    const after = h('select', { testid: 'shovel-delete-after' }, [['never', 'Never'], ['queue-length', 'After the queue\'s initial length'], ['count', 'After a number of messages']].map(([v, l]) => h('option', { value: v }, l)));
    const count = h('input', { type: 'number', min: 0, testid: 'shovel-delete-count', placeholder: 'number of messages' });
    const prefetch = h('input', { type: 'number', min: 1, max: 65535, value: 1000, testid: 'shovel-prefetch' });
    const delay = h('input', { type: 'number', min: 0, step: 'any', value: 5, testid: 'shovel-reconnect-delay' });
    const headers = h('input', { type: 'checkbox', testid: 'shovel-forward-headers' });
    const addForm = form('Add a shovel', 'add-shovel', [['Virtual host', 'vhost', vh], ['Name', 'name', name],
      ['Source URI', 'srcURI', srcURI], ['Source', 'srcKind', srcKind], ['Source name', 'src', src], ['Source routing key', 'srcKey', srcKey],
      ['Destination URI', 'destURI', destURI], ['Destination', 'destKind', destKind], ['Destination name', 'dest', dest], ['Destination routing key', 'destKey', destKey],
      ['Ack mode', 'ack', ack], ['Delete after', 'after', after], ['Messages', 'count', count], ['Prefetch', 'prefetch', prefetch],
      ['Reconnect delay (s)', 'delay', delay], ['Add forwarding headers', 'headers', headers]], 'Add shovel', async (v) => {
      const value = { 'src-protocol': 'amqp091', 'dest-protocol': 'amqp091',
        'src-uri': v.srcURI.trim() || localURI(v.vhost), 'dest-uri': v.destURI.trim() || localURI(v.vhost),
        'ack-mode': v.ack, 'src-prefetch-count': +v.prefetch, 'reconnect-delay': +v.delay, 'dest-add-forward-headers': v.headers };
      if (v.srcKind === 'queue') value['src-queue'] = v.src;
      else { value['src-exchange'] = v.src; value['src-exchange-key'] = v.srcKey; }
      if (v.destKind === 'queue' && v.dest) value['dest-queue'] = v.dest;
      else if (v.destKind === 'exchange') {
        if (v.dest) value['dest-exchange'] = v.dest;
        if (v.destKey) value['dest-exchange-key'] = v.destKey;
      }
      if (v.after === 'count') {
        if (!/^\d+$/.test(v.count)) throw new Error('Messages must be a whole number.');
        value['src-delete-after'] = +v.count;
      } else value['src-delete-after'] = v.after;
      await api('PUT', 'parameters/shovel/' + enc(v.vhost) + '/' + enc(v.name), { component: 'shovel', vhost: v.vhost, name: v.name, value });
      return 'Shovel ' + v.name + ' added.';
    });
    return adminPage(main, 'Shovels', [{
      what: 'shovels', row: 'shovel-row', empty: 'No shovels.', load: () => api('GET', 'shovels'), cols: [
        { label: 'Virtual host', cell: (l) => l.vhost, narrow: true },
        { label: 'Name', cell: (l) => h('span', { testid: 'shovel-row-name' }, l.name) },
        { label: 'State', cell: (l) => [stateTag(l.state), l.reason ? h('pre', { class: 'reason', testid: 'shovel-reason' }, l.reason) : ''] },
        { label: 'Source', cell: (l) => [h('div', { class: 'muted' }, l.src_uri), endpoint(l, 'src_')] },
        { label: 'Destination', cell: (l) => [h('div', { class: 'muted' }, l.dest_uri), endpoint(l, 'dest_')] },
        { label: 'Forwarded', n: true, testid: 'shovel-forwarded', cell: (l) => fmtNum(l.messages_forwarded) },
        { label: 'Remaining', n: true, testid: 'shovel-remaining', cell: (l) => l.messages_remaining === undefined ? 'no limit' : fmtNum(l.messages_remaining) },
        { label: 'Last changed', cell: (l) => l.timestamp, narrow: true },
        { label: '', cell: (l) => [
          confirmButton('Restart', 'shovel-restart', async () => {
            await api('DELETE', 'shovels/vhost/' + enc(l.vhost) + '/' + enc(l.name) + '/restart');
            toast('Shovel ' + l.name + ' restarted.'); refreshNow();
          }, l.vhost + '/' + l.name), ' ',
          confirmButton('Delete', 'shovel-delete', async () => {
            await api('DELETE', 'shovels/vhost/' + enc(l.vhost) + '/' + enc(l.name));
            toast('Shovel ' + l.name + ' deleted.'); refreshNow();
          }, l.vhost + '/' + l.name)] },
      ], forms: [addForm],
    }]);
  };

  // federation shows the federation links (api/federation-links, in
  // RabbitMQ's rabbitmq_federation_management shape) as its Federation
  // Status page does, with their errors and a restart each.
  pages.federation = (main) => adminPage(main, 'Federation status', [{
    what: 'federation-links', row: 'federation-link-row', empty: 'No federation links.', load: async () => {
      try { return await api('GET', 'federation-links'); } catch (e) {
        if (e.status === 404) return [];
        throw e;
      }
    }, cols: [
      { label: 'Upstream', cell: (l) => [l.upstream, (l.type === 'exchange' && l.upstream_exchange !== l.exchange) ? h('sub', null, ' ' + l.upstream_exchange) :
        (l.type === 'queue' && l.upstream_queue !== l.queue) ? h('sub', null, ' ' + l.upstream_queue) : ''] },
      { label: 'URI', cell: (l) => h('code', null, l.uri), narrow: true },
      { label: 'Virtual host', cell: (l) => l.vhost, narrow: true },
      { label: 'Exchange / queue', cell: (l) => [l.type === 'queue' ? link(queueHref({ vhost: l.vhost, name: l.queue }), l.queue) :
        link(exchangeHref({ vhost: l.vhost, name: l.exchange }), l.exchange), h('sub', null, ' ' + l.type)] },
      { label: 'State', cell: (l) => [stateTag(l.status), l.error ? h('pre', { class: 'reason', testid: 'federation-error' }, l.error) : ''] },
      { label: 'Forwarded', n: true, cell: (l) => l.messages_forwarded === undefined ? '' : h('span', { testid: 'federation-forwarded' }, String(l.messages_forwarded)) },
      { label: 'Last changed', cell: (l) => l.timestamp, narrow: true },
      { label: 'ID', cell: (l) => h('code', null, l.id), narrow: true },
      { label: 'Consumer tag', cell: (l) => l.consumer_tag || '', narrow: true },
      { label: '', cell: (l) => confirmButton('Restart', 'federation-restart', async () => {
        await api('DELETE', 'federation-links/vhost/' + enc(l.vhost) + '/' + enc(l.id) + '/' + enc(l.node) + '/restart');
        toast('Federation link ' + l.id + ' restarted.'); refreshNow();
      }, l.vhost + '/' + l.id) },
    ],
  }]);

  // ---- Routing and refresh -------------------------------------------

  const routes = [
    [/^\/?$/, 'overview', 'overview'],
    [/^\/overview$/, 'overview', 'overview'],
    [/^\/queues$/, 'queues', 'queues'],
    [/^\/queues\/([^/]+)\/([^/]+)$/, 'queue', 'queues'],
    [/^\/exchanges$/, 'exchanges', 'exchanges'],
    [/^\/exchanges\/([^/]+)\/([^/]+)$/, 'exchange', 'exchanges'],
    [/^\/connections$/, 'connections', 'connections'],
    [/^\/connections\/([^/]+)$/, 'connection', 'connections'],
    [/^\/channels$/, 'channels', 'channels'],
    [/^\/vhosts$/, 'vhosts', 'vhosts'],
    [/^\/users$/, 'users', 'users'],
    [/^\/permissions$/, 'permissions', 'permissions'],
    [/^\/policies$/, 'policies', 'policies'],
    [/^\/limits$/, 'limits', 'limits'],
    [/^\/definitions$/, 'definitions', 'definitions'],
    [/^\/shovels$/, 'shovels', 'shovels'],
    [/^\/federation$/, 'federation', 'federation'],
  ];

  function route() {
    if (!state.user) return;
    const path = location.hash.replace(/^#/, '') || '/';
    // Each page renders into an element of its own, so that a refresh of
    // the page left behind, still in flight, writes only into its
    // detached element.
    const main = h('div');
    fill($('#page'), main);
    clearTimeout(state.timer);
    for (const [re, name, nav] of routes) {
      const m = path.match(re);
      if (!m) continue;
      document.querySelectorAll('#nav a').forEach((a) => a.toggleAttribute('aria-current', false));
      const a = document.querySelector(`#nav a[data-page="${nav}"]`);
      if (a) a.setAttribute('aria-current', 'page');
      const params = m.slice(1).map(decodeURIComponent);
      document.title = (params[params.length - 1] || name) + ' · Warren';
      $('#page').dataset.page = name;
      state.page = pages[name](main, params);
      state.page.root = main;
      refreshNow();
      return;
    }
    fill(main, h('h1', null, 'Not found'), h('p', null, 'No such page. ', link('#/', 'Overview')));
    state.page = null;
  }

  // refreshNow refreshes the current page, one refresh at a time per page
  // (a page left behind may still finish its own), then schedules the
  // next.
  async function refreshNow() {
    clearTimeout(state.timer);
    const page = state.page;
    if (!page || !state.user) return;
    if (!page.busy) {
      page.busy = true;
      try {
        await page.refresh();
        if (page === state.page) document.body.dataset.refreshed = String(Date.now());
      } catch (e) {
        if (page !== state.page || !state.user) { /* left behind, or logged out */ }
        else if (e.denied) denied(page.root, e);
        else toast(e.message, true);
      } finally {
        page.busy = false;
      }
    }
    const every = +$('#interval').value;
    if (every > 0 && page === state.page) {
      clearTimeout(state.timer);
      state.timer = setTimeout(refreshNow, every);
    }
  }

  document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshNow(); else clearTimeout(state.timer); });
  window.addEventListener('hashchange', route);
  $('#interval').addEventListener('change', refreshNow);
  $('#logout').addEventListener('click', () => logout(''));

  $('#login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const btn = $('[data-testid=login-submit]');
    btn.disabled = true;
    try {
      startSession(await login($('#login-username').value, $('#login-password').value));
    } catch (e) {
      $('#login-error').textContent = e.status === 401 ? 'Login failed: ' + e.message : e.message;
    } finally {
      btn.disabled = false;
    }
  });

  // Keyboard: g then a letter goes to a page; / filters; j and k move
  // between rows; r refreshes; ? shows help. Ignored while typing.
  const goKeys = { o: '#/', q: '#/queues', e: '#/exchanges', c: '#/connections', h: '#/channels', v: '#/vhosts', u: '#/users', p: '#/permissions', l: '#/policies', i: '#/limits', d: '#/definitions', s: '#/shovels', f: '#/federation' };
  let pendingG = false;
  document.addEventListener('keydown', (ev) => {
    if (!state.user || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (pendingG) {
      pendingG = false;
      if (goKeys[ev.key]) { location.hash = goKeys[ev.key]; $('#main').focus(); ev.preventDefault(); }
      return;
    }
    if (ev.key === 'g') { pendingG = true; setTimeout(() => { pendingG = false; }, 1500); return; }
    if (ev.key === '/' && state.page && state.page.focusFilter) { ev.preventDefault(); state.page.focusFilter(); return; }
    if (ev.key === 'r') { refreshNow(); return; }
    if (ev.key === '?') { $('#help').showModal(); return; }
    if (ev.key === 'j' || ev.key === 'k') {
      const rows = [...document.querySelectorAll('#page tbody tr a')];
      if (!rows.length) return;
      const i = rows.indexOf(document.activeElement);
      const n = ev.key === 'j' ? (i < 0 ? 0 : Math.min(i + 1, rows.length - 1)) : (i < 0 ? 0 : Math.max(i - 1, 0));
      rows[n].focus();
      ev.preventDefault();
    }
  });

  // Start: resume this tab's session, or ask for a login.
  if (state.auth) {
    api('GET', 'whoami').then(startSession).catch((e) => logout(e.denied ? '' : e.message));
  } else {
    showLogin('');
  }
})();
