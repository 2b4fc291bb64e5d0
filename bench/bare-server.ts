// The floor for public reads: a bare uWebSockets.js server answering GET from a Map of
// path -> the very answer the node gave there, head and body, and nothing else. The head is every
// line the node wrote but those uWebSockets.js writes itself (date, its own name, the length),
// kept as ready bytes and written in one call (as the fastest server of these bytes would), then a
// request id of the node's shape from a counter (P10 asks one per answer). Run as its own process
// by the GET benchmark: `node dist/bench/bare-server.js ROUTES_FILE`, where the file holds
// `{ "path": { "body", "head": [[name, value], ...], "requestId" }, ... }`. Announces its port
// like the node does, stops on SIGTERM.
import { readFileSync } from 'node:fs';
import uws from 'uWebSockets.js';

/** One public answer as the node gave it. */
export interface BareRoute {
  body: string;
  /** The node's header lines but the request id and those uWebSockets.js writes itself. */
  head: [string, string][];
  /** One request id the node answered with: the bare server's ids keep its prefix and length. */
  requestId: string;
}

interface Answer {
  body: Buffer;
  name: Buffer;
  lines: Buffer;
}

function answerOf(route: BareRoute): Answer {
  const [first, ...rest] = route.head;
  if (first === undefined) throw new Error('the route has no head');
  const lines = [first[1], ...rest.map(([name, value]) => `${name}: ${value}`)].join('\r\n');
  return { body: Buffer.from(route.body, 'utf8'), name: Buffer.from(first[0]), lines: Buffer.from(lines) };
}

const routesFile = process.argv[2];
if (routesFile === undefined) throw new Error('usage: bare-server.js ROUTES_FILE');
const routes = JSON.parse(readFileSync(routesFile, 'utf8')) as Record<string, BareRoute>;
const answers = new Map<string, Answer>(Object.entries(routes).map(([path, route]) => [path, answerOf(route)]));
const sample = Object.values(routes)[0]?.requestId ?? 'req_0';
const idPrefix = sample.replace(/[0-9]+$/, '');
let counter = 10 ** (sample.length - idPrefix.length - 1);

const REQUEST_ID = Buffer.from('path-request-id');
const app = uws.App();
app.get('/*', (res, req) => {
  const answer = answers.get(req.getUrl());
  res.cork(() => {
    if (answer === undefined) {
      res.writeStatus('404 Not Found').end();
      return;
    }
    res.writeHeader(answer.name, answer.lines);
    res.writeHeader(REQUEST_ID, idPrefix + counter++);
    res.end(answer.body);
  });
});

app.listen('127.0.0.1', 0, (socket) => {
  if (!socket) throw new Error('the bare server cannot listen');
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: uws.us_socket_local_port(socket) })}\n`);
  process.on('SIGTERM', () => {
    uws.us_listen_socket_close(socket);
    process.exit(0);
  });
});
