// The thoonk admin dashboard: plain JavaScript over the JSON API of the
// same server. Every text that comes from Redis is put into the page with
// textContent (never parsed as HTML), so an item holding markup shows as text.
'use strict';

const state = { timer: null, view: null, rates: new Map(), events: null, soon: null };
const REFRESH_MS = 3000;

function token() { return sessionStorage.getItem('thoonk-admin-token') || ''; }

function setStatus(text, isError) {
  const s = document.getElementById('status');
  s.textContent = text;
  s.className = isError ? 'error' : '';
}

async function api(path, body) {
  const headers = {};
  if (token()) headers['Authorization'] = 'Bearer ' + token();
  const init = { headers, cache: 'no-store' };
  if (body !== undefined) {
    init.method = 'POST';
    headers['Content-Type'] = 'application/json';
    // The server refuses writes without it (a cross-site form cannot send it).
    headers['X-Thoonk-Admin'] = '1';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) document.getElementById('token-form').hidden = false;
  if (!res.ok) {
    const err = data && data.error ? data.error : { code: String(res.status), message: res.statusText };
    const text = err.message + (err.server ? ' (Redis: ' + err.server + ')' : '');
    throw new Error(text);
  }
  return data;
}

function q(name) { return encodeURIComponent(name); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function link(text, hash) {
  const a = el('a', text);
  a.href = hash;
  return a;
}

function button(text, cls, onClick) {
  const b = el('button', text, cls);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

function time(ms) {
  if (!ms) return '';
  return new Date(Number(ms)).toISOString().replace('T', ' ').replace('Z', '');
}

function mount(tplId) {
  const view = document.getElementById('view');
  view.replaceChildren(document.getElementById(tplId).content.cloneNode(true));
  return view;
}

async function act(what, path, body, then) {
  try {
    setStatus(what + '…');
    await api(path, body || {});
    setStatus(what + ': done');
    if (then) await then();
  } catch (e) {
    setStatus(what + ' failed: ' + e.message, true);
  }
}

// ---- queues -----------------------------------------------------------------

function rate(name, counter, value) {
  const key = name + '\u0000' + counter;
  const now = Date.now();
  const prev = state.rates.get(key);
  state.rates.set(key, { value, at: now });
  if (!prev || now <= prev.at) return '';
  return ((value - prev.value) * 1000 / (now - prev.at)).toFixed(1);
}

function queueRow(qu) {
  const tr = el('tr');
  tr.dataset.queue = qu.name;
  const name = el('td');
  name.append(link(qu.name, '#queue/' + q(qu.name) + '/waiting'));
  tr.append(name, el('td', qu.type));
  const c = qu.counts;
  for (const k of ['waiting', 'claimed', 'scheduled', 'dead', 'held']) {
    tr.append(el('td', c[k] === undefined ? '' : c[k], 'num ' + k));
  }
  tr.append(el('td', qu.workers, 'num'));
  tr.append(el('td', qu.paused ? 'paused' : 'running', 'state'));
  tr.append(el('td', rate(qu.name, 'puts', c.puts || 0), 'num'));
  tr.append(el('td', c.finishes === undefined ? '' : rate(qu.name, 'finishes', c.finishes), 'num'));
  return tr;
}

async function showQueues(view, cursor, append) {
  const data = await api('/api/queues?count=100' + (cursor ? '&cursor=' + q(cursor) : ''));
  const body = view.querySelector('#queues-table tbody');
  if (!append) body.replaceChildren();
  for (const qu of data.queues) body.append(queueRow(qu));
  view.querySelector('.empty').hidden = body.children.length > 0;
  const more = view.querySelector('.more');
  more.hidden = !data.next;
  more.onclick = () => showQueues(view, data.next, true).catch(fail);
}

// ---- one queue --------------------------------------------------------------

const STATES = ['waiting', 'claimed', 'scheduled', 'dead', 'held'];

function jobRow(name, st, j, reload) {
  const tr = el('tr');
  tr.dataset.job = j.id;
  const id = el('td');
  id.append(link(j.id, '#job/' + q(name) + '/' + q(j.id)));
  tr.append(id, el('td', j.item, 'item'), el('td', j.failures || 0, 'num'),
    el('td', time(j.run_at)), el('td', j.last_error || '', 'error'));
  const actions = el('td');
  const path = '/api/queues/' + q(name) + '/jobs/' + q(j.id) + '/';
  if (st === 'dead') actions.append(button('Retry', 'act-retry', () => act('Retry ' + j.id, path + 'retry', {}, reload)));
  if (st === 'scheduled') actions.append(button('Run now', 'act-promote', () => act('Run ' + j.id + ' now', path + 'promote', {}, reload)));
  if (st === 'claimed') actions.append(button('Abort', 'act-abort', () => act('Abort ' + j.id, path + 'abort', { outcome: 'cancelled' }, reload)));
  actions.append(button('Remove', 'act-retract danger', () => {
    if (confirm('Remove job ' + j.id + '?')) act('Remove ' + j.id, path + 'retract', {}, reload);
  }));
  tr.append(actions);
  return tr;
}

async function loadJobs(view, name, st, cursor, append) {
  const data = await api('/api/queues/' + q(name) + '/jobs?state=' + st + '&count=50' +
    (cursor ? '&cursor=' + q(cursor) : ''));
  const body = view.querySelector('#jobs-table tbody');
  if (!append) body.replaceChildren();
  const reload = () => refreshQueue(view, name, st);
  for (const j of data.jobs) body.append(jobRow(name, st, j, reload));
  view.querySelector('.empty').hidden = body.children.length > 0;
  const more = view.querySelector('.more');
  more.hidden = !data.next;
  more.onclick = () => loadJobs(view, name, st, data.next, true).catch(fail);
}

async function loadHead(view, name) {
  const data = await api('/api/queues/' + q(name));
  const status = view.querySelector('#queue-status');
  status.textContent = data.paused ? 'paused' : 'running';
  status.className = data.paused ? 'paused' : 'running';
  const pause = view.querySelector('#pause-btn');
  pause.textContent = data.paused ? 'Resume' : 'Pause';
  pause.dataset.paused = data.paused ? '1' : '0';
  pause.hidden = data.type !== 'job';
  const rateInput = view.querySelector('#rate-input');
  if (document.activeElement !== rateInput) rateInput.value = data.rate_limit || 0;
  const dl = view.querySelector('#queue-counts');
  dl.replaceChildren();
  for (const [k, v] of Object.entries(data.counts)) {
    const d = el('div');
    d.dataset.count = k;
    d.append(el('dt', k), el('dd', v));
    dl.append(d);
  }
  return data;
}

async function loadWorkers(view, name) {
  const body = view.querySelector('#workers-table tbody');
  const data = await api('/api/queues/' + q(name) + '/workers');
  body.replaceChildren();
  for (const w of data.workers) {
    const tr = el('tr');
    tr.append(el('td', w.name), el('td', w.alive ? 'yes' : 'lapsed'), el('td', time(w.last_heartbeat)),
      el('td', w.claims.join(', ')), el('td', w.description, 'item'));
    body.append(tr);
  }
}

async function refreshQueue(view, name, st) {
  const head = await loadHead(view, name);
  await loadJobs(view, name, st);
  if (head.type === 'job') await loadWorkers(view, name);
}

function showQueue(view, name, st) {
  view.querySelector('.queue-name').textContent = name;
  const tabs = view.querySelector('#state-tabs');
  for (const s of STATES) {
    const a = link(s, '#queue/' + q(name) + '/' + s);
    a.dataset.state = s;
    if (s === st) a.className = 'active';
    tabs.append(a);
  }
  const base = '/api/queues/' + q(name) + '/';
  const reload = () => refreshQueue(view, name, st);
  view.querySelector('#pause-btn').addEventListener('click', (ev) => {
    const paused = ev.target.dataset.paused === '1';
    act(paused ? 'Resume' : 'Pause', base + (paused ? 'resume' : 'pause'), {}, reload);
  });
  view.querySelector('#rate-btn').addEventListener('click', () => {
    const n = Number(view.querySelector('#rate-input').value);
    act('Set rate limit', base + 'rate_limit', { rate_limit: n }, reload);
  });
  view.querySelector('#retry-all-btn').addEventListener('click', async () => {
    // In bounded steps: each call retries a batch and answers where to go on.
    let cursor = '';
    let total = 0;
    try {
      do {
        const r = await api(base + 'retry_dead', { cursor });
        total += r.retried;
        cursor = r.next;
      } while (cursor);
      setStatus('Retried ' + total + ' dead letters');
    } catch (e) {
      setStatus('Retry all failed: ' + e.message, true);
    }
    await reload();
  });
  view.querySelector('#search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = view.querySelector('#search-id').value.trim();
    if (id) location.hash = '#job/' + q(name) + '/' + q(id);
  });
  return { refresh: reload };
}

// ---- one job ----------------------------------------------------------------

async function showJob(view, name, id) {
  view.querySelector('.job-id').textContent = id;
  const ql = view.querySelector('.queue-link');
  ql.textContent = name;
  ql.href = '#queue/' + q(name) + '/waiting';
  const j = await api('/api/queues/' + q(name) + '/jobs/' + q(id));
  const body = view.querySelector('#job-detail tbody');
  body.replaceChildren();
  const rows = [['State', j.state], ['Item', j.item], ['Failures', j.failures],
    ['Retries', j.retry_count], ['Stalls', j.stall_count], ['Run at', time(j.run_at)],
    ['Last error', j.last_error], ['Progress', j.progress], ['Worker', j.worker],
    ['Claimed at', time(j.claimed_at)], ['Result', j.result], ['Held put', j.held ? 'yes' : '']];
  for (const [k, v] of rows) {
    if (v === undefined || v === null || v === '') continue;
    const tr = el('tr');
    const td = el('td');
    td.append(el('pre', v));
    tr.append(el('th', k), td);
    body.append(tr);
  }
  const actions = view.querySelector('#job-actions');
  actions.replaceChildren();
  const path = '/api/queues/' + q(name) + '/jobs/' + q(id) + '/';
  const again = () => route();
  if (j.state === 'dead') actions.append(button('Retry', 'act-retry', () => act('Retry', path + 'retry', {}, again)));
  if (j.state === 'scheduled') actions.append(button('Run now', 'act-promote', () => act('Run now', path + 'promote', {}, again)));
  if (j.state === 'claimed') actions.append(button('Abort', 'act-abort', () => act('Abort', path + 'abort', {}, again)));
  if (j.state !== 'finished') {
    actions.append(button('Remove', 'act-retract danger', () => {
      if (confirm('Remove job ' + id + '?')) act('Remove', path + 'retract', {}, () => { location.hash = '#queue/' + q(name) + '/waiting'; });
    }));
  }
}

// ---- feeds ------------------------------------------------------------------

async function showFeeds(view, cursor, append) {
  const data = await api('/api/feeds?count=100' + (cursor ? '&cursor=' + q(cursor) : ''));
  const body = view.querySelector('#feeds-table tbody');
  if (!append) body.replaceChildren();
  for (const f of data.feeds) {
    const tr = el('tr');
    tr.dataset.feed = f.name;
    const n = el('td');
    n.append(link(f.name, '#feed/' + q(f.name)));
    tr.append(n, el('td', f.type), el('td', f.length, 'num'), el('td', f.publishes, 'num'));
    body.append(tr);
  }
  view.querySelector('.empty').hidden = body.children.length > 0;
  const more = view.querySelector('.more');
  more.hidden = !data.next;
  more.onclick = () => showFeeds(view, data.next, true).catch(fail);
}

async function showFeed(view, name, cursor, append) {
  view.querySelector('.feed-name').textContent = name;
  const data = await api('/api/feeds/' + q(name) + '/items?count=50' + (cursor ? '&cursor=' + q(cursor) : ''));
  const body = view.querySelector('#items-table tbody');
  if (!append) body.replaceChildren();
  for (const it of data.items) {
    const tr = el('tr');
    tr.dataset.item = it.id;
    tr.append(el('td', it.id), el('td', it.item, 'item'));
    body.append(tr);
  }
  view.querySelector('.empty').hidden = body.children.length > 0;
  const more = view.querySelector('.more');
  more.hidden = !data.next;
  more.onclick = () => showFeed(view, name, data.next, true).catch(fail);
}

// ---- routing ----------------------------------------------------------------

function fail(e) { setStatus(e.message, true); }

// Live updates of one queue: its job events (sent when the queue's `events`
// setting is on) make the view reload at once rather than at the next
// poll. EventSource cannot send the access token, so with a token the page
// polls only.
function listen(name, refresh) {
  if (token() || typeof EventSource === 'undefined') return;
  const es = new EventSource('/api/queues/' + q(name) + '/events');
  es.addEventListener('job', () => {
    if (state.soon) return;
    state.soon = setTimeout(() => { state.soon = null; refresh().catch(fail); }, 250);
  });
  es.addEventListener('ready', (ev) => {
    const info = JSON.parse(ev.data);
    document.getElementById('view').dataset.live = info.events ? 'on' : 'off';
  });
  state.events = es;
}

function stopListening() {
  if (state.events) state.events.close();
  state.events = null;
  clearTimeout(state.soon);
  state.soon = null;
}

function route() {
  clearInterval(state.timer);
  stopListening();
  setStatus('');
  state.timer = null;
  const parts = location.hash.replace(/^#/, '').split('/').map(decodeURIComponent);
  const page = parts[0] || 'queues';
  for (const a of document.querySelectorAll('header nav a')) {
    a.classList.toggle('active', a.id === 'nav-' + (page.startsWith('feed') ? 'feeds' : 'queues'));
  }
  let refresh = null;
  let view;
  if (page === 'queue' && parts[1]) {
    view = mount('tpl-queue');
    const st = STATES.includes(parts[2]) ? parts[2] : 'waiting';
    refresh = showQueue(view, parts[1], st).refresh;
    listen(parts[1], refresh);
  } else if (page === 'job' && parts[1] && parts[2]) {
    view = mount('tpl-job');
    showJob(view, parts[1], parts[2]).then(() => setStatus('')).catch(fail);
    return;
  } else if (page === 'feeds') {
    view = mount('tpl-feeds');
    refresh = () => showFeeds(view);
  } else if (page === 'feed' && parts[1]) {
    view = mount('tpl-feed');
    showFeed(view, parts[1]).then(() => setStatus('')).catch(fail);
    return;
  } else {
    view = mount('tpl-queues');
    refresh = () => showQueues(view);
  }
  const tick = () => refresh().then(() => {
    // A failed action's message stays until the next view.
    if (document.getElementById('status').className !== 'error') setStatus('updated ' + new Date().toLocaleTimeString());
  }).catch(fail);
  tick();
  state.timer = setInterval(tick, REFRESH_MS);
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('thoonk-admin-token', document.getElementById('token').value);
    document.getElementById('token-form').hidden = true;
    route();
  });
  window.addEventListener('hashchange', route);
  route();
});
