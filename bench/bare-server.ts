// The floor for public reads: a bare uWebSockets.js server answering GET from a Map of
// path -> bytes with the same content type as the node, and nothing else. Run as its own process
// by the GET benchmark: `node dist/bench/bare-server.js ROUTES_FILE`, where the file holds
// `{ "path": "body", ... }`. Announces its port like the node does, stops on SIGTERM.
import { readFileSync } from 'node:fs';
import uws from 'uWebSockets.js';

const routesFile = process.argv[2];
if (routesFile === undefined) throw new Error('usage: bare-server.js ROUTES_FILE');
const routes = JSON.parse(readFileSync(routesFile, 'utf8')) as Record<string, string>;
const bodies = new Map<string, Buffer>(Object.entries(routes).map(([path, body]) => [path, Buffer.from(body, 'utf8')]));

const app = uws.App();
app.get('/*', (res, req) => {
  const body = bodies.get(req.getUrl());
  res.cork(() => {
    if (body === undefined) {
      res.writeStatus('404 Not Found').end();
      return;
    }
    res.writeHeader('content-type', 'application/json');
    res.end(body);
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
