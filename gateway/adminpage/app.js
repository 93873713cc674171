// The edge admin page (docs/operations.md, "The admin page"): the running
// policy's rules with live decision rates and their dry-run state, a
// dry-run toggle, a forgive of an identity, and recent refusals. It talks
// only to the admin API of the node that served it (GET /admin/rules,
// POST /admin/dry-run, POST /admin/forgive, GET /admin/refused), with the admin token from this tab's session
// storage as Authorization: Bearer. No outside assets: the node's
// Content-Security-Policy is default-src 'self'.
'use strict';

(() => {
  const POLL_MS = 2000; // how often the rules and refusals are read
  const REFUSED_MINUTES = 5; // the window of GET /admin/refused
  const TOKEN_KEY = 'edge-admin-token';

  // The decisions of edge_decisions_total (docs/policy.md, "Decisions")
  // that each rate sums. An identity 400 is a refusal, never a deny.
  const ALLOW = ['allow', 'store_error_allow'];
  const REFUSE = ['deny', 'store_error_deny', 'invalid_identity', 'missing_identity'];
  const WOULD = ['dry_run_deny'];

  const $ = (id) => document.getElementById(id);

  // prev holds the last poll's totals per rule, for the rates:
  // {at: ms (performance.now), totals: Map(rule name → {allow, refuse, would})}.
  let prev = null;
  let timer = 0;
  let seq = 0; // the newest poll; an older one's answer is dropped
  let nodeDryRun = false;
  let nodeToggled = false; // node-wide dry-run by a "*" toggle, which can be removed
  let pending = null; // the toggle being asked for: {rule, dryRun}

  const STATUS_TEXT = {
    400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found',
    405: 'Method Not Allowed', 413: 'Payload Too Large', 422: 'Unprocessable Entity',
    500: 'Internal Server Error', 501: 'Not Implemented', 502: 'Bad Gateway', 503: 'Service Unavailable',
  };

  // APIError is a failed admin call, worded for the operator:
  // "GET /admin/rules: 501 Not Implemented: not built yet".
  class APIError extends Error {
    constructor(method, path, status, detail) {
      const head = status ? `${status} ${STATUS_TEXT[status] || ''}`.trim() : 'no answer';
      super(`${method} ${path}: ${head}: ${detail}`);
      this.status = status;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  // api calls the admin API and resolves to the decoded JSON answer, or
  // rejects with an APIError carrying the status and the node's
  // {"error": …} message.
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    const init = { method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new APIError(method, path, 0, 'the node did not answer (' + e.message + ')');
    }
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!resp.ok) {
      const detail = data && typeof data.error === 'string' ? data.error : (text.trim() || resp.statusText || 'no detail');
      throw new APIError(method, path, resp.status, detail);
    }
    if (data === null || typeof data !== 'object') {
      throw new APIError(method, path, resp.status, 'the answer is not a JSON object');
    }
    return data;
  }

  function sum(decisions, names) {
    let n = 0;
    for (const name of names) n += Number(decisions[name]) || 0;
    return n;
  }

  function totals(rule) {
    const d = rule.decisions || {};
    return { allow: sum(d, ALLOW), refuse: sum(d, REFUSE), would: sum(d, WOULD) };
  }

  // rate is the decisions per second between two polls, or null when
  // unknown: the first poll, or a counter that went down (a reload
  // replaced the rule's counters).
  function rate(cur, old, seconds) {
    if (old === undefined || !(seconds > 0) || cur < old) return null;
    return (cur - old) / seconds;
  }

  function formatRate(r) {
    if (r === null) return '–';
    if (r === 0) return '0';
    return r >= 10 ? r.toFixed(0) : r.toFixed(2);
  }

  function formatTime(rfc3339) {
    const d = new Date(rfc3339);
    return isNaN(d) ? rfc3339 : d.toLocaleString();
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-')) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c);
    }
    return e;
  }

  function list(v) {
    return Array.isArray(v) && v.length ? v.join(', ') : '';
  }

  function matchText(r) {
    const parts = [];
    if (list(r.methods)) parts.push(list(r.methods));
    if (list(r.hosts)) parts.push('host ' + list(r.hosts));
    parts.push(list(r.paths) || 'every path');
    if (list(r.key)) parts.push('key ' + list(r.key));
    return parts.join(' · ');
  }

  function limitText(r) {
    if (r.action === 'deny' || r.action === 'skip' || !r.limit) return r.action || '';
    const s = r.adaptive
      ? `${r.limit} in flight now (adaptive ${r.adaptive})`
      : r.algorithm === 'concurrency'
        ? `${r.limit} in flight (concurrency, lease ${r.period})`
        : `${r.limit} / ${r.period} (${r.algorithm})`;
    return r.action && r.action !== 'limit' ? `${s}, ${r.action}` : s;
  }

  // FIXED_DRY_RUN says why a rule in dry-run without a toggle of its own
  // cannot be enforced from here: removing a toggle never overrides these.
  const FIXED_DRY_RUN = 'in dry-run by the policy (dry_run = true, action = "log"), the -dry-run flag '
    + 'or a node-wide toggle; only a toggle of its own can be removed here';

  function dryRunCell(r) {
    if (r.action === 'skip') return el('td', { class: 'muted' }, 'skip rule');
    if (!r.dry_run) return el('td', { class: 'dryrun-off' }, 'enforcing');
    let text = 'dry-run';
    if (r.dry_run_until) text += ' until ' + formatTime(r.dry_run_until);
    else if (r.action === 'log') text += ' (action = "log")';
    else text += nodeDryRun ? ' (node-wide)' : ' (policy)';
    const td = el('td', { class: 'dryrun-on' }, text);
    if (!r.dry_run_until) td.title = FIXED_DRY_RUN;
    if (r.dry_run_reason) td.append(el('span', { class: 'total' }, r.dry_run_reason));
    return td;
  }

  // toggleButton turns a rule's dry-run on for a while, or removes its
  // own toggle; a rule in dry-run for another reason gets none, as
  // docs/operations.md ("The admin page") says: there is nothing here to
  // enforce it with, and its dry-run cell says why (FIXED_DRY_RUN).
  function toggleButton(r) {
    if (r.action === 'skip') return null;
    const on = !r.dry_run;
    if (!on && !r.dry_run_until) return null;
    return el('button', { type: 'button', class: 'toggle', 'data-rule': r.name, 'data-to': String(on) },
      on ? 'dry-run…' : 'enforce…');
  }

  function rateCell(cls, r, total) {
    const hot = r !== null && r > 0 ? ' hot' : '';
    return el('td', { class: `num ${cls}${hot}`, 'data-rate': r === null ? '' : String(r) },
      formatRate(r), el('span', { class: 'total' }, `${total} total`));
  }

  function renderRules(data) {
    nodeDryRun = Boolean(data.node_dry_run);
    nodeToggled = Boolean(data.node_dry_run_until);
    const state = $('node-state');
    if (nodeDryRun) {
      state.textContent = 'node-wide dry-run' + (data.node_dry_run_until ? ' until ' + formatTime(data.node_dry_run_until) : '');
      state.className = 'state dry';
    } else {
      state.textContent = 'enforcing';
      state.className = 'state';
    }
    const nodeToggle = $('node-toggle');
    nodeToggle.hidden = false;
    nodeToggle.textContent = nodeDryRun ? 'node-wide enforce…' : 'node-wide dry-run…';
    nodeToggle.disabled = nodeDryRun && !nodeToggled;
    nodeToggle.title = nodeToggle.disabled ? 'node-wide dry-run by the policy (dry_run in the edge block) or the -dry-run flag' : '';

    const now = performance.now();
    const seconds = prev ? (now - prev.at) / 1000 : 0;
    const next = new Map();
    const rows = [];
    for (const r of Array.isArray(data.rules) ? data.rules : []) {
      const cur = totals(r);
      next.set(r.name, cur);
      const old = prev ? prev.totals.get(r.name) : undefined;
      const name = el('td', { class: 'name' }, r.name);
      if (r.sensitive) name.append(el('span', { class: 'total' }, 'sensitive'));
      rows.push(el('tr', { 'data-rule': r.name, 'data-dry-run': String(Boolean(r.dry_run)) },
        name,
        el('td', {}, matchText(r)),
        el('td', {}, limitText(r)),
        rateCell('allow', rate(cur.allow, old && old.allow, seconds), cur.allow),
        rateCell('refuse', rate(cur.refuse, old && old.refuse, seconds), cur.refuse),
        rateCell('would', rate(cur.would, old && old.would, seconds), cur.would),
        dryRunCell(r),
        el('td', {}, toggleButton(r))));
    }
    $('rules').tBodies[0].replaceChildren(...rows);
    prev = { at: now, totals: next };
  }

  function renderRefused(data) {
    const out = [];
    for (const r of Array.isArray(data.rules) ? data.rules : []) {
      const top = Array.isArray(r.top) ? r.top : [];
      if (!top.length) continue;
      const body = top.map((k) => el('tr', {},
        el('td', { class: 'hash' }, String(k.key)),
        el('td', { class: 'hash' }, String(k.client)),
        el('td', { class: 'num' }, String(k.count))));
      out.push(el('div', { class: 'refused-rule', 'data-rule': r.name },
        el('h3', {}, r.name),
        el('table', {},
          el('thead', {}, el('tr', {}, el('th', {}, 'key'), el('th', {}, 'client'), el('th', { class: 'num' }, 'refused'))),
          el('tbody', {}, ...body))));
    }
    if (!out.length) out.push(el('p', { class: 'muted' }, `No refusals in the last ${REFUSED_MINUTES} minutes.`));
    $('refused').replaceChildren(...out);
  }

  // poll reads the rules and the refusals now, then every POLL_MS.
  async function poll() {
    clearTimeout(timer);
    const mine = ++seq;
    const [rules, refused] = await Promise.allSettled([
      api('GET', '/admin/rules'),
      api('GET', `/admin/refused?minutes=${REFUSED_MINUTES}`),
    ]);
    if (mine !== seq || !token()) return;
    for (const res of [rules, refused]) {
      if (res.status === 'rejected' && res.reason.status === 401) {
        signOut('The node refused the token: ' + res.reason.message);
        return;
      }
    }
    if (rules.status === 'fulfilled') {
      renderRules(rules.value);
      $('rules-error').textContent = '';
    } else {
      $('rules-error').textContent = rules.reason.message;
    }
    if (refused.status === 'fulfilled') {
      renderRefused(refused.value);
      $('refused-error').textContent = '';
    } else {
      $('refused-error').textContent = refused.reason.message;
    }
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    timer = setTimeout(poll, POLL_MS);
  }

  function showApp() {
    $('login').hidden = true;
    $('rules-section').hidden = false;
    $('refused-section').hidden = false;
    $('forget-token').hidden = false;
    $('forgive-open').hidden = false;
    poll();
  }

  function signOut(message) {
    clearTimeout(timer);
    seq++;
    sessionStorage.removeItem(TOKEN_KEY);
    prev = null;
    $('rules').tBodies[0].replaceChildren();
    $('refused').replaceChildren();
    $('rules-error').textContent = '';
    $('refused-error').textContent = '';
    $('notice').textContent = '';
    $('node-state').textContent = '';
    $('updated').textContent = '';
    $('rules-section').hidden = true;
    $('refused-section').hidden = true;
    $('node-toggle').hidden = true;
    $('forget-token').hidden = true;
    $('forgive-open').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('token').value = '';
    $('token').focus();
  }

  // openToggle asks for the reason (and, to turn dry-run on, the
  // duration) of a toggle of rule (a rule's name, or "*": node-wide).
  function openToggle(rule, dryRun) {
    pending = { rule, dryRun };
    const what = rule === '*' ? 'every rule (node-wide)' : `rule ${rule}`;
    $('toggle-title').textContent = dryRun ? `Dry-run ${what}` : `Enforce ${what} again`;
    $('toggle-for-label').hidden = !dryRun;
    $('toggle-for').required = dryRun;
    $('toggle-reason').value = '';
    $('toggle-error').textContent = '';
    $('toggle-submit').disabled = false;
    $('toggle-dialog').showModal();
    $('toggle-reason').focus();
  }

  async function submitToggle(ev) {
    ev.preventDefault();
    if (!pending) return;
    const body = { rule: pending.rule, dry_run: pending.dryRun, reason: $('toggle-reason').value.trim() };
    if (pending.dryRun) body.for = $('toggle-for').value.trim();
    $('toggle-submit').disabled = true;
    let answer;
    try {
      answer = await api('POST', '/admin/dry-run', body);
    } catch (e) {
      $('toggle-submit').disabled = false;
      if (e.status === 401) {
        $('toggle-dialog').close();
        signOut('The node refused the token: ' + e.message);
        return;
      }
      $('toggle-error').textContent = e.message;
      return;
    }
    const what = body.rule === '*' ? 'node-wide' : `rule ${body.rule}`;
    if (answer.dry_run === body.dry_run) {
      $('notice').textContent = body.dry_run
        ? `${what}: dry-run until ${formatTime(answer.until)}`
        : `${what}: enforcing again`;
    } else {
      $('notice').textContent = `${what}: the toggle is removed, but it stays in dry-run (${FIXED_DRY_RUN})`;
    }
    pending = null;
    $('toggle-dialog').close();
    poll();
  }

  // The forgive dialog's fields, by the identity name the API takes.
  const FORGIVE_FIELDS = {
    account: 'forgive-account', ip: 'forgive-ip', phone: 'forgive-phone',
    visitor: 'forgive-visitor', visitor_ip: 'forgive-visitor-ip',
  };

  function openForgive() {
    for (const id of Object.values(FORGIVE_FIELDS)) $(id).value = '';
    $('forgive-for').value = '';
    $('forgive-reason').value = '';
    $('forgive-error').textContent = '';
    $('forgive-submit').disabled = false;
    $('forgive-dialog').showModal();
    $(FORGIVE_FIELDS.account).focus();
  }

  // submitForgive sends POST /admin/forgive with the identity given, and
  // says which rules were forgiven and which need more; the node's own
  // words when it refuses.
  async function submitForgive(ev) {
    ev.preventDefault();
    const identity = {};
    for (const [name, id] of Object.entries(FORGIVE_FIELDS)) {
      const v = $(id).value.trim();
      if (v) identity[name] = v;
    }
    if (!Object.keys(identity).length) {
      $('forgive-error').textContent = 'Give the account, ip, phone or visitor to forgive.';
      return;
    }
    const body = { identity, reason: $('forgive-reason').value.trim() };
    const dur = $('forgive-for').value.trim();
    if (dur) body.for = dur;
    $('forgive-submit').disabled = true;
    let answer;
    try {
      answer = await api('POST', '/admin/forgive', body);
    } catch (e) {
      $('forgive-submit').disabled = false;
      if (e.status === 401) {
        $('forgive-dialog').close();
        signOut('The node refused the token: ' + e.message);
        return;
      }
      $('forgive-error').textContent = e.message;
      return;
    }
    const forgiven = (Array.isArray(answer.forgiven) ? answer.forgiven : []).map((f) => f.rule);
    let text = `forgiven (${answer.scope === 'fleet' ? 'the fleet' : 'this node'}): ${forgiven.join(', ')}`;
    if (answer.exempt_until) text += `; exempt until ${formatTime(answer.exempt_until)}`;
    for (const s of Array.isArray(answer.skipped) ? answer.skipped : []) {
      text += `; skipped ${s.rule} (needs ${list(s.missing)} too)`;
    }
    $('notice').textContent = text;
    $('forgive-dialog').close();
    poll();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('token').value = '';
      $('login-error').textContent = '';
      showApp();
    });
    $('forget-token').addEventListener('click', () => signOut(''));
    $('rules').tBodies[0].addEventListener('click', (ev) => {
      const b = ev.target.closest('button.toggle');
      if (b) openToggle(b.dataset.rule, b.dataset.to === 'true');
    });
    $('node-toggle').addEventListener('click', () => openToggle('*', !nodeDryRun));
    $('toggle-form').addEventListener('submit', submitToggle);
    $('forgive-open').addEventListener('click', openForgive);
    $('forgive-form').addEventListener('submit', submitForgive);
    $('forgive-cancel').addEventListener('click', () => $('forgive-dialog').close());
    $('toggle-cancel').addEventListener('click', () => {
      pending = null;
      $('toggle-dialog').close();
    });
    if (token()) showApp();
    else $('token').focus();
  });
})();
