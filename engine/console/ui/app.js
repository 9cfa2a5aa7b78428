// The Strata console's page. Every call goes to the console's own /api,
// which signs S3, IAM and admin requests with the signed-in credentials;
// this script never sees a secret after sign-in (the session cookie is
// HttpOnly). Text from the server is only ever set as textContent.
'use strict';

const PART = 8 * 1024 * 1024; // upload part size (more for files over 80 GB)
let csrf = '';
let session = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function say(msg) { $('status').textContent = msg; }
function fail(err) { $('error').textContent = err; }
function clearMessages() { say(''); fail(''); }

class APIError extends Error {
  constructor(status, code, message) { super(code + ': ' + message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const opts = { method, headers: { 'X-Strata-CSRF': csrf }, credentials: 'same-origin' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = null; }
  if (!resp.ok) {
    if ((resp.status === 401 || (data && data.code === 'CSRF')) && path !== '/api/login') showLogin();
    throw new APIError(resp.status, data ? data.code : String(resp.status), data ? data.message : resp.statusText);
  }
  return data;
}

function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') u.set(k, v);
  return u.toString();
}

function size(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

function when(t) { return t ? new Date(t).toLocaleString() : ''; }

const views = ['login-view', 'buckets-view', 'objects-view', 'object-view', 'tenant-view', 'users-view', 'claims-view'];
function show(id) {
  for (const v of views) $(v).hidden = v !== id;
  const signedIn = id !== 'login-view';
  $('nav').hidden = !signedIn;
  $('logout').hidden = !signedIn;
  $('who').hidden = !signedIn;
}

function showLogin() {
  session = null;
  csrf = '';
  sessionStorage.removeItem('strata-csrf');
  show('login-view');
}

// The CSRF token comes once, with the sign-in, and is kept in this tab's
// sessionStorage (per origin, port included): a cookie another port of
// the host planted holds a session whose token this page never had.
function signedIn(s) {
  session = s;
  if (s.csrf) {
    csrf = s.csrf;
    sessionStorage.setItem('strata-csrf', s.csrf);
  }
  $('who').textContent = 'Signed in as ' + (s.name || s.accessKey) + (s.admin ? ' (administrator)' : '');
  $('nav-tenant').hidden = !s.admin;
}

// Routes: #/buckets, #/b/BUCKET/PREFIX..., #/o/BUCKET/KEY..., #/tenant, #/users, #/claims
// What the page says when a single sign-on comes back refused (the
// console's callback names the reason in the fragment; the detail is in
// the server's log). Only the callback's own codes are shown: anyone can
// link to the page with a fragment.
function ssoMessage(code) {
  if (code === 'expired') return 'The sign-in took longer than 10 minutes or began in another browser: sign in again.';
  if (code === 'state') return 'The identity provider answered a sign-in this browser did not start (or one another tab replaced): sign in again.';
  if (code === 'session') return 'The credentials the tenant gave do not fit in a browser cookie.';
  if (code === 'issuer-access_denied') return 'The identity provider refused the sign-in.';
  if (code === 'sts-AccessDenied') return 'Signed in at the identity provider, but the role does not trust this identity: ask the tenant\'s administrators.';
  if (/^issuer(-[a-z_]{1,40})?$/.test(code)) return 'The identity provider could not sign you in (' + code + ').';
  if (/^sts(-[A-Za-z]{1,40})?$/.test(code)) return 'Signed in at the identity provider, but the tenant gave no credentials (' + code + ').';
  return 'The single sign-on failed.';
}

function b64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// A single sign-on: the page makes the session's CSRF token itself and
// keeps it, and only its hash goes through the identity provider and back.
async function startSSO() {
  const token = b64url(crypto.getRandomValues(new Uint8Array(18)));
  const hash = b64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(token))));
  const start = await api('POST', '/api/oidc/start', { csrfHash: hash });
  sessionStorage.setItem('strata-csrf', token);
  location.assign(start.url);
}

async function route() {
  clearMessages();
  if (location.hash.startsWith('#oidc-error=')) {
    let code = '';
    try { code = decodeURIComponent(location.hash.slice('#oidc-error='.length)); } catch (e) { code = ''; }
    history.replaceState(null, '', location.pathname);
    show('login-view');
    fail(ssoMessage(code));
    return;
  }
  const justSignedIn = location.hash === '#signed-in';
  if (justSignedIn) history.replaceState(null, '', location.pathname + '#/buckets');
  if (!session) {
    csrf = sessionStorage.getItem('strata-csrf') || '';
    const unfinished = 'The single sign-on finished in another tab than it began in: sign in again here.';
    if (!csrf) { showLogin(); if (justSignedIn) fail(unfinished); return; }
    try { signedIn(await api('GET', '/api/session')); } catch (e) { showLogin(); if (justSignedIn) fail(unfinished); return; }
  }
  try {
    const h = decodeURIComponent(location.hash.slice(1) || '/buckets');
    if (h.startsWith('/b/')) {
      const rest = h.slice(3);
      const i = rest.indexOf('/');
      await showObjects(i < 0 ? rest : rest.slice(0, i), i < 0 ? '' : rest.slice(i + 1));
    } else if (h.startsWith('/o/') && h.indexOf('/', 3) > 3) {
      const rest = h.slice(3);
      const i = rest.indexOf('/');
      await showObject(rest.slice(0, i), rest.slice(i + 1));
    } else if (h === '/tenant') {
      await showTenant();
    } else if (h === '/users') {
      await showUsers();
    } else if (h === '/claims') {
      await showClaims();
    } else {
      await showBuckets();
    }
  } catch (e) {
    fail(e.message);
  }
}

function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

const enc = (s) => encodeURIComponent(s);

async function showBuckets() {
  show('buckets-view');
  const body = $('bucket-table').tBodies[0];
  body.replaceChildren();
  const buckets = await api('GET', '/api/buckets');
  for (const b of buckets) {
    const del = el('button', { type: 'button', class: 'quiet', text: 'Delete', 'aria-label': 'Delete bucket ' + b.name });
    del.addEventListener('click', () => confirmThen(del, async () => {
      await api('DELETE', '/api/buckets?' + q({ bucket: b.name }));
      say('Bucket ' + b.name + ' deleted.');
      await showBuckets();
    }));
    body.append(el('tr', {}, el('td', {}, el('a', { href: '#/b/' + enc(b.name) + '/', text: b.name })),
      el('td', { text: when(b.created) }), el('td', {}, del)));
  }
  if (buckets.length === 0) body.append(el('tr', {}, el('td', { colspan: '3', text: 'No buckets yet.' })));
}

// confirmThen asks for a second click within 5 s before doing something
// that cannot be undone.
function confirmThen(button, action) {
  if (button.dataset.armed) {
    delete button.dataset.armed;
    action().catch((e) => fail(e.message));
    return;
  }
  const label = button.textContent;
  button.dataset.armed = '1';
  button.textContent = 'Click again to confirm';
  setTimeout(() => { delete button.dataset.armed; button.textContent = label; }, 5000);
}

let listing = { bucket: '', prefix: '', next: '' };

async function showObjects(bucket, prefix) {
  show('objects-view');
  listing = { bucket, prefix, next: '' };
  $('objects-title').textContent = bucket + '/' + prefix;
  const crumbs = $('crumbs');
  crumbs.replaceChildren(el('a', { href: '#/buckets', text: 'Buckets' }), ' / ',
    el('a', { href: '#/b/' + enc(bucket) + '/', text: bucket }));
  let acc = '';
  for (const part of prefix.split('/').filter(Boolean)) {
    acc += part + '/';
    crumbs.append(' / ', el('a', { href: '#/b/' + enc(bucket) + '/' + enc(acc), text: part }));
  }
  $('object-table').tBodies[0].replaceChildren();
  await morePage();
}

async function morePage() {
  const { bucket, prefix, next } = listing;
  const page = await api('GET', '/api/objects?' + q({ bucket, prefix, next }));
  const body = $('object-table').tBodies[0];
  for (const p of page.prefixes) {
    body.append(el('tr', {}, el('td', {}, el('a', { href: '#/b/' + enc(bucket) + '/' + enc(p), text: p.slice(prefix.length) })),
      el('td', { text: 'folder' }), el('td')));
  }
  for (const o of page.objects) {
    body.append(el('tr', {}, el('td', {}, el('a', { href: '#/o/' + enc(bucket) + '/' + enc(o.key), text: o.key.slice(prefix.length) })),
      el('td', { text: size(o.size) }), el('td', { text: when(o.modified) })));
  }
  if (body.rows.length === 0) body.append(el('tr', {}, el('td', { colspan: '3', text: 'Nothing here yet.' })));
  listing.next = page.next || '';
  $('more').hidden = !listing.next;
}

function xhrSend(method, path, blob, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, path);
    x.setRequestHeader('X-Strata-CSRF', csrf);
    x.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded); };
    x.onload = () => {
      let data = null;
      try { data = JSON.parse(x.responseText); } catch (e) { data = null; }
      if (x.status >= 200 && x.status < 300) resolve(data);
      else reject(new APIError(x.status, data ? data.code : String(x.status), data ? data.message : x.statusText));
    };
    x.onerror = () => reject(new Error('the upload was cut off'));
    x.send(blob);
  });
}

async function upload(file) {
  const { bucket, prefix } = listing;
  const key = prefix + file.name;
  const bar = $('upload-progress');
  const text = $('upload-text');
  bar.hidden = false;
  bar.value = 0;
  const progress = (done) => {
    const pct = file.size ? Math.floor(done * 100 / file.size) : 100;
    bar.value = pct;
    text.textContent = 'Uploading ' + file.name + ': ' + pct + '% (' + size(done) + ' of ' + size(file.size) + ')';
  };
  const params = { bucket, key, type: file.type || 'application/octet-stream' };
  const partSize = Math.max(PART, Math.ceil(file.size / 10000));
  if (file.size <= partSize) {
    await xhrSend('PUT', '/api/upload?' + q(params), file, progress);
  } else {
    const { uploadId } = await api('POST', '/api/multipart?' + q(params));
    const parts = [];
    try {
      for (let off = 0, n = 1; off < file.size; off += partSize, n++) {
        const blob = file.slice(off, off + partSize);
        const r = await xhrSend('PUT', '/api/multipart?' + q({ bucket, key, uploadId, part: n }), blob, (d) => progress(off + d));
        parts.push({ part: n, etag: r.etag });
      }
      await api('POST', '/api/multipart/complete?' + q({ bucket, key, uploadId }), { parts });
    } catch (e) {
      await api('DELETE', '/api/multipart?' + q({ bucket, key, uploadId })).catch(() => {});
      throw e;
    }
  }
  progress(file.size);
  text.textContent = 'Uploaded ' + file.name + ' (' + size(file.size) + ').';
  say('Uploaded ' + key + '.');
}

let current = { bucket: '', key: '' };

async function showObject(bucket, key) {
  show('object-view');
  current = { bucket, key };
  $('object-title').textContent = key;
  $('presign-url').value = '';
  const d = await api('GET', '/api/object?' + q({ bucket, key }));
  const facts = $('object-facts');
  facts.replaceChildren();
  const fact = (k, v) => { if (v) facts.append(el('dt', { text: k }), el('dd', { text: v })); };
  fact('Bucket', bucket);
  fact('Size', size(d.size) + ' (' + d.size + ' bytes)');
  fact('ETag', d.etag);
  fact('Content type', d.contentType);
  fact('Modified', when(d.modified));
  fact('Version', d.versionId);
  fact('Replication', d.replicationStatus);
  fact('Object lock', d.retentionMode ? d.retentionMode + ' until ' + when(d.retainUntil) : 'no retention');
  fact('Legal hold', d.legalHold || 'OFF');
  for (const [k, v] of Object.entries(d.metadata)) fact('Metadata ' + k, v);
  $('object-download').href = '/api/download?' + q({ bucket, key });
  $('tags-text').value = Object.entries(d.tags).map(([k, v]) => k + '=' + v).join('\n');
  const body = $('version-table').tBodies[0];
  body.replaceChildren();
  for (const v of await api('GET', '/api/versions?' + q({ bucket, key }))) {
    const cells = [el('td', { text: (v.versionId || 'null') + (v.latest ? ' (latest)' : '') + (v.deleteMarker ? ' delete marker' : '') }),
      el('td', { text: v.deleteMarker ? '' : size(v.size) }), el('td', { text: when(v.modified) })];
    const actions = el('td');
    if (!v.deleteMarker) actions.append(el('a', { href: '/api/download?' + q({ bucket, key, versionId: v.versionId }), text: 'Download' }), ' ');
    const del = el('button', { type: 'button', class: 'quiet', text: 'Delete version' });
    del.addEventListener('click', () => confirmThen(del, async () => {
      await api('DELETE', '/api/object?' + q({ bucket, key, versionId: v.versionId }));
      say('Version deleted.');
      await showObject(bucket, key).catch(() => go('#/b/' + enc(bucket) + '/'));
    }));
    actions.append(del);
    body.append(el('tr', {}, ...cells, actions));
  }
}

function parent(key) { return key.slice(0, key.lastIndexOf('/') + 1); }

async function showTenant() {
  show('tenant-view');
  const t = await api('GET', '/api/tenant');
  const out = $('tenant-body');
  out.replaceChildren();
  const i = t.info;
  out.append(el('dl', { class: 'facts' },
    el('dt', { text: 'Mode' }), el('dd', { text: i.mode }),
    el('dt', { text: 'Version' }), el('dd', { text: i.version }),
    el('dt', { text: 'Up for' }), el('dd', { text: i.uptime }),
    el('dt', { text: 'Capacity' }), el('dd', { text: size(i.capacity.usedBytes) + ' used of ' + size(i.capacity.totalBytes) + ' raw, ' + size(i.capacity.usableBytes) + ' usable' })));
  if (t.tls && t.tls.certificate) {
    out.append(el('p', { id: 'cert-expiry', text: 'Certificate ' + t.tls.certificate.subject + ' expires ' + when(t.tls.certificate.notAfter) }));
  }
  for (const p of i.pools || []) {
    out.append(el('h2', { text: 'Pool ' + p.name + ': ' + p.state + ' (' + p.sets + ' sets of ' + p.setSize + ', parity ' + p.parity + ')' }));
    const tb = el('tbody');
    for (const d of p.drives) {
      tb.append(el('tr', {}, el('td', { text: d.endpoint }), el('td', { text: String(d.set) + '/' + d.index }),
        el('td', { class: d.state === 'online' ? 'state-ok' : 'state-bad', text: d.state }), el('td', { text: size(d.usedBytes) + ' of ' + size(d.totalBytes) })));
    }
    out.append(el('table', { class: 'drives' }, el('caption', { class: 'visually-hidden', text: 'Drives of pool ' + p.name }),
      el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Drive' }), el('th', { scope: 'col', text: 'Set/index' }),
        el('th', { scope: 'col', text: 'State' }), el('th', { scope: 'col', text: 'Used' }))), tb));
  }
  if (t.heal) {
    const h = t.heal;
    out.append(el('h2', { text: 'Healing' }), el('p', { id: 'heal', text: h.queueLength + ' queued, ' + h.objectsHealed + ' objects healed (' +
      size(h.bytesHealed) + '), ' + h.failed + ' failed; integrity scans ' + h.scanCycles + (h.scanning ? ', scanning now' : '') }));
    for (const d of h.drives || []) {
      out.append(el('p', { text: 'Rebuild of drive ' + d.set + '/' + d.index + ': ' + d.objectsHealed + ' objects' + (d.done ? ', done' : ', in progress') + (d.error ? ', ' + d.error : '') }));
    }
  }
  for (const d of t.decommissions || []) {
    out.append(el('p', { text: 'Decommission of pool ' + d.pool + ': ' + d.state + ', ' + d.objectsMoved + ' objects (' + size(d.bytesMoved) + ') moved' + (d.done ? ', done' : '') }));
  }
  if (t.replication && t.replication.buckets && t.replication.buckets.length) {
    out.append(el('h2', { text: 'Replication' }));
    for (const b of t.replication.buckets) {
      out.append(el('p', { text: b.bucket + ': ' + b.replicated + ' replicated, ' + b.failed + ' failed, last lag ' + b.lastLagSeconds.toFixed(2) + ' s' }));
    }
  }
  await showCharts(out);
}

const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function fmt(v) {
  if (v === 0) return '0';
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}

// chart draws one series as a line over the last hour, with its latest
// value and peak in its title and its accessible name.
function chart(s) {
  const w = 560, h = 140, pad = 4;
  const pts = s.points;
  const last = pts.length ? pts[pts.length - 1][1] : 0;
  const peak = pts.reduce((m, p) => Math.max(m, p[1]), 0);
  const summary = s.title + ', ' + s.unit + ': now ' + fmt(last) + ', peak ' + fmt(peak) + ' over the last hour (' + pts.length + ' points)';
  const box = svg('svg', { viewBox: '0 0 ' + w + ' ' + h, width: w, height: h, role: 'img', 'aria-label': summary, class: 'chart' });
  box.append(svg('rect', { x: 0, y: 0, width: w, height: h, class: 'chart-frame' }));
  if (pts.length > 1) {
    // The x axis is the whole hour, so a young tenant's line starts late.
    const t1 = Math.max(Date.now() / 1000, pts[pts.length - 1][0]), t0 = t1 - 3600;
    const top = peak > 0 ? peak : 1;
    const xy = pts.map((p) => [pad + (w - 2 * pad) * Math.max(0, (p[0] - t0) / (t1 - t0)), h - pad - (h - 2 * pad) * (p[1] / top)]);
    box.append(svg('polyline', { points: xy.map((q) => q[0].toFixed(1) + ',' + q[1].toFixed(1)).join(' '), class: 'chart-line' }));
  }
  return el('figure', { class: 'chart-box' }, box, el('figcaption', { text: summary }));
}

async function showCharts(out) {
  const c = await api('GET', '/api/charts');
  if (!c.configured) return;
  const section = el('section', { id: 'charts', 'aria-labelledby': 'charts-title' }, el('h2', { id: 'charts-title', text: 'The last hour (Prometheus)' }));
  if (c.error) section.append(el('p', { class: 'error', text: 'No charts: ' + c.error }));
  for (const s of c.series) section.append(chart(s));
  out.append(section);
}

async function showUsers() {
  show('users-view');
  const u = await api('GET', '/api/users');
  const out = $('users-body');
  out.replaceChildren();
  out.append(el('h2', { text: 'IAM users' }));
  if (u.iamError) out.append(el('p', { class: 'error', text: 'Not listed: ' + u.iamError }));
  const tb = el('tbody');
  for (const x of u.users) {
    const keys = el('td');
    const actions = el('td');
    for (const k of x.accessKeys) {
      keys.append(el('span', { text: k.id + ' (' + k.status + ')' }), ' ');
      if (!x.claim) {
        const del = el('button', { type: 'button', class: 'quiet', text: 'Delete key', 'aria-label': 'Delete key ' + k.id });
        del.addEventListener('click', () => confirmThen(del, async () => {
          await api('DELETE', '/api/users/keys?' + q({ user: x.name, id: k.id }));
          say('Access key ' + k.id + ' deleted.');
          await showUsers();
        }));
        keys.append(del, ' ');
      }
    }
    if (x.claim) {
      actions.append(el('span', { text: 'claim of namespace ' + x.claim + ' (the operator owns it)' }));
    } else {
      const mk = el('button', { type: 'button', class: 'quiet', text: 'New access key', 'aria-label': 'New access key for ' + x.name });
      mk.addEventListener('click', async () => {
        clearMessages();
        try {
          const k = await api('POST', '/api/users/keys?' + q({ user: x.name }));
          await showUsers();
          $('new-key').replaceChildren(el('strong', { text: 'New access key of ' + k.user + ' (the secret is shown this once): ' }),
            el('code', { id: 'new-key-id', text: k.accessKeyId }), ' ', el('code', { id: 'new-key-secret', text: k.secretAccessKey }));
        } catch (err) { fail(err.message); }
      });
      const del = el('button', { type: 'button', class: 'quiet', text: 'Delete user', 'aria-label': 'Delete user ' + x.name });
      del.addEventListener('click', () => confirmThen(del, async () => {
        await api('DELETE', '/api/users?' + q({ user: x.name }));
        say('User ' + x.name + ' deleted.');
        await showUsers();
      }));
      actions.append(mk, ' ', del);
    }
    const name = el('td', { text: x.name });
    if (x.error) name.append(el('span', { class: 'error', text: ' (not all read: ' + x.error + ')' }));
    tb.append(el('tr', {}, name, el('td', { text: x.groups.join(', ') }), el('td', { text: x.policies.join(', ') }), keys, actions));
  }
  if (u.users.length === 0) tb.append(el('tr', {}, el('td', { colspan: '5', text: 'No IAM users, or none these credentials may list.' })));
  out.append(el('p', { id: 'new-key', role: 'status' }));
  out.append(el('table', { id: 'user-table' }, el('caption', { class: 'visually-hidden', text: 'IAM users' }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'User' }), el('th', { scope: 'col', text: 'Groups' }),
      el('th', { scope: 'col', text: 'Policies' }), el('th', { scope: 'col', text: 'Access keys' }),
      el('th', { scope: 'col', text: 'Actions' }))), tb));
  out.append(el('h2', { text: 'Users the tenant declares (managed by the operator, read-only)' }));
  const db = el('tbody');
  for (const x of u.declared) {
    db.append(el('tr', {}, el('td', { text: x.accessKey }), el('td', { text: x.policy }), el('td', { text: (x.buckets || []).join(', ') || 'every bucket' })));
  }
  if (u.declared.length === 0) db.append(el('tr', {}, el('td', { colspan: '3', text: 'None, or not shown to these credentials.' })));
  out.append(el('table', {}, el('caption', { class: 'visually-hidden', text: 'Declared users' }),
    el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Access key' }), el('th', { scope: 'col', text: 'Policy' }),
      el('th', { scope: 'col', text: 'Buckets' }))), db));
}

// The claims page: per namespace, its claimed buckets and its accesses'
// users and roles, all read-only.
async function showClaims() {
  show('claims-view');
  const c = await api('GET', '/api/claims');
  const out = $('claims-body');
  out.replaceChildren();
  const namespaces = [...new Set([...c.buckets.map((b) => b.namespace), ...c.principals.map((p) => p.namespace)])].sort();
  if (namespaces.length === 0) out.append(el('p', { text: 'No claims, or none these credentials may see.' }));
  for (const ns of namespaces) {
    out.append(el('h2', { text: 'Namespace ' + ns }));
    const tb = el('tbody');
    for (const b of c.buckets.filter((x) => x.namespace === ns)) {
      tb.append(el('tr', {}, el('td', { text: 'bucket' }),
        el('td', {}, el('a', { href: '#/b/' + enc(b.bucket) + '/', text: b.bucket })), el('td', { text: 'BucketClaim ' + b.claim })));
    }
    for (const p of c.principals.filter((x) => x.namespace === ns)) {
      tb.append(el('tr', {}, el('td', { text: 'IAM ' + p.kind }), el('td', { text: p.name }),
        el('td', { text: 'BucketAccess' + (p.policies.length ? ', policies ' + p.policies.join(', ') : '') })));
    }
    out.append(el('table', { class: 'claims-table' }, el('caption', { class: 'visually-hidden', text: 'Claims of namespace ' + ns }),
      el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'Kind' }), el('th', { scope: 'col', text: 'Name' }),
        el('th', { scope: 'col', text: 'Made for' }))), tb));
  }
  if (c.unread) out.append(el('p', { text: c.unread + ' bucket(s) not read: these credentials may not read their tags.' }));
  if (c.iamError) out.append(el('p', { class: 'error', text: 'Users and roles not listed: ' + c.iamError }));
}

function wire() {
  $('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    try {
      const s = await api('POST', '/api/login', { accessKey: $('access-key').value, secretKey: $('secret-key').value, sessionToken: $('session-token').value });
      $('secret-key').value = '';
      signedIn(s);
      go('#/buckets');
    } catch (err) { fail(err.message); }
  });
  $('logout').addEventListener('click', async () => {
    await api('POST', '/api/logout').catch(() => {});
    showLogin();
  });
  $('bucket-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    const name = $('bucket-name').value;
    try {
      await api('POST', '/api/buckets', { name, versioning: $('bucket-versioning').checked, objectLock: $('bucket-lock').checked });
      say('Bucket ' + name + ' created.');
      $('bucket-name').value = '';
      await showBuckets();
    } catch (err) { fail(err.message); }
  });
  $('upload-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    const file = $('upload-file').files[0];
    if (!file) return;
    $('upload-start').disabled = true;
    try {
      await upload(file);
      await showObjects(listing.bucket, listing.prefix);
    } catch (err) {
      $('upload-text').textContent = 'Upload of ' + file.name + ' failed.';
      fail(err.message);
    } finally { $('upload-start').disabled = false; }
  });
  $('user-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    const name = $('user-name').value;
    try {
      await api('POST', '/api/users', { name });
      $('user-name').value = '';
      await showUsers();
      say('User ' + name + ' created.');
    } catch (err) { fail(err.message); }
  });
  $('policy-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    try {
      await api('PUT', '/api/users/policy?' + q({ user: $('policy-user').value, name: $('policy-name').value }), { document: $('policy-doc').value });
      await showUsers();
      say('Policy ' + $('policy-name').value + ' of ' + $('policy-user').value + ' saved.');
    } catch (err) { fail(err.message); }
  });
  $('more').addEventListener('click', () => morePage().catch((e) => fail(e.message)));
  $('object-presign').addEventListener('click', async () => {
    clearMessages();
    try {
      const r = await api('POST', '/api/presign', { bucket: current.bucket, key: current.key, seconds: 3600 });
      $('presign-url').value = r.url;
      say('Link made; it works for an hour without signing in.');
    } catch (err) { fail(err.message); }
  });
  const del = $('object-delete');
  del.addEventListener('click', () => confirmThen(del, async () => {
    await api('DELETE', '/api/object?' + q(current));
    say('Deleted ' + current.key + '.');
    go('#/b/' + enc(current.bucket) + '/' + enc(parent(current.key)));
  }));
  $('tags-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    clearMessages();
    const tags = {};
    for (const line of $('tags-text').value.split('\n')) {
      const i = line.indexOf('=');
      if (i > 0) tags[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    try {
      await api('PUT', '/api/tags?' + q(current), { tags });
      say('Tags saved.');
    } catch (err) { fail(err.message); }
  });
  $('sso-start').addEventListener('click', () => { clearMessages(); startSSO().catch((err) => fail(err.message)); });
  fetch('/api/config', { credentials: 'same-origin' }).then((r) => r.json()).then((c) => {
    if (!c.sso) return;
    $('sso-issuer').textContent = c.sso;
    $('sso').hidden = false;
  }).catch(() => {});
  window.addEventListener('hashchange', route);
  route();
}

document.addEventListener('DOMContentLoaded', wire);
