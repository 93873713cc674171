// Origin of the differential harness (internal/differential, docs/differential.md).
//
// Express (Debian's node-express 4 and its body-parser, found with
// NODE_PATH=/usr/share/nodejs) reading the identity fields the way Express
// applications do, with the two body parsers mounted together as apps mount
// them, and echoing what each idiom read:
//
//   /health                 200 "ok" (readiness)
//   /v/express-extended     express.json() + express.urlencoded({extended: true}) (qs)
//   /v/express-simple       express.json() + express.urlencoded({extended: false}) (querystring)
//   /probe/*                200: a probe the edge forwarded
//
// Both read req.body.NAME. A body-parser error (bad JSON, an unsupported
// charset or Content-Encoding) is the app's 4xx: it read nothing, and the
// echo says so. The echo is JSON: {"variant", "ct" (hex of the Content-Type
// the app saw), "fields": {NAME: {"type", "values": [hex of the UTF-8 of each
// leaf]}}, "error"}. Usage: NODE_PATH=/usr/share/nodejs node app.js PORT

'use strict';

const express = require('express');

const FIELDS = ['phone', 'username', 'email', 'challenge_id', 'code'];

function leaves(v, out) {
  if (v === null || v === undefined) return;
  if (typeof v === 'object') {
    for (const k of Object.keys(v)) leaves(v[k], out);
    return;
  }
  out.push(Buffer.from(String(v), 'utf8').toString('hex'));
}

function reading(v) {
  if (v === null || v === undefined) return { type: 'absent', values: [] };
  const out = [];
  leaves(v, out);
  return { type: Array.isArray(v) ? 'array' : typeof v, values: out };
}

function echo(req, res, variant, src, error) {
  const fields = {};
  for (const f of FIELDS) {
    const own = src !== null && typeof src === 'object' && Object.prototype.hasOwnProperty.call(src, f);
    fields[f] = reading(own ? src[f] : undefined);
  }
  res.set('X-Differential-Variant', variant);
  res.type('application/json');
  res.send(JSON.stringify({
    variant,
    ct: Buffer.from(req.get('Content-Type') || '', 'latin1').toString('hex'),
    fields,
    error: error || '',
  }));
}

const app = express();
app.set('etag', false);
app.get('/health', (req, res) => res.send('ok'));
app.all(/^\/probe\//, (req, res) => echo(req, res, 'probe', null));

const variants = {
  'express-extended': [express.json(), express.urlencoded({ extended: true })],
  'express-simple': [express.json(), express.urlencoded({ extended: false })],
};
for (const [name, parsers] of Object.entries(variants)) {
  const router = express.Router();
  router.use(...parsers);
  router.all('/', (req, res) => echo(req, res, name, req.body));
  // A body-parser error: the application answers 4xx having read nothing.
  router.use((err, req, res, next) => echo(req, res, name, null, String(err.type || err.message)));
  app.use('/v/' + name, router);
}

const server = app.listen(Number(process.argv[2]), '127.0.0.1');
server.keepAliveTimeout = 60000;
