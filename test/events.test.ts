// The operator's webhook tooling over a real node (P11): `path-node listen` verifies each real
// delivery under both schemes (v1 with the secret, v1a with the keys, both read from the data
// directory), prints it and forwards it; `path-node events list|show|resend` read the kept
// events from the data directory while the node runs, and a resend reaches the target again.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, Client, createCredential, startNode, tempDir, removeDir, type NodeProcess } from './support/harness.js';
import { Receiver } from './support/receiver.js';
import { waitFor } from './support/wait.js';

const EUR = { rail: 'book', asset_type: 'fiat', asset_code: 'EUR' };

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** As cli, without blocking this process: the receiver the command sends to answers from here. */
function cliAsync(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => { stdout += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
}

const lines = (text: string) => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));

describe('path-node listen and path-node events', () => {
  const handler = new Receiver();
  let listener: ChildProcess;
  let listened = '';
  let listenUrl: string;
  let node: NodeProcess;
  let dataDir: string;
  let local: Client;
  let beta: Client;

  async function paid(): Promise<string> {
    const created = await local.post('/requests', { accepts: [EUR] });
    expect(created.status, created.text).toBe(201);
    expect((await beta.post(`/requests/${created.json.reference}/paid`)).status).toBe(200);
    return created.json.reference;
  }

  beforeAll(async () => {
    await handler.open();
    dataDir = tempDir('path-events');
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    listener = spawn(process.execPath, [CLI, 'listen', '--port', '0', '--data-dir', dataDir, '--forward-to', handler.url('/handler')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    listener.stdout!.on('data', (d: Buffer) => { listened += d.toString(); });
    listener.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
    const port = await waitFor('listen to start', () => /receiving on http:\/\/127\.0\.0\.1:(\d+)/.exec(err)?.[1]);
    listenUrl = `http://127.0.0.1:${port}/hooks`;
    node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', listenUrl] });
    local = new Client(node.baseUrl, own);
    beta = new Client(node.baseUrl, b);
  });

  afterAll(async () => {
    listener.kill('SIGTERM');
    await node.stop();
    await handler.close();
    removeDir(dataDir);
  });

  it('listen verifies a real delivery under v1 and v1a, prints it, and forwards body and signed headers', async () => {
    const reference = await paid();
    const forwarded = await waitFor('the forwarded delivery', () => handler.of('request.paid', reference)[0]);
    const printed = await waitFor('the printed line', () => lines(listened).find((l) => l.body?.data?.reference === reference));
    expect(printed).toMatchObject({ event: 'request.paid', v1: { valid: true }, v1a: { valid: true }, answered: 200 });
    expect(printed.webhook_id).toBe(forwarded.headers['webhook-id']);
    expect(forwarded.raw).toBe(JSON.stringify(printed.body));
    expect(String(forwarded.headers['webhook-signature'])).toMatch(/^v1,\S+ v1a,\S+$/);
  });

  it('listen answers 400 to a delivery that verifies under neither scheme, and does not forward it', async () => {
    const before = handler.deliveries.length;
    const body = JSON.stringify({ type: 'path.event', id: 'evt_forged', event: 'request.paid', data: {} });
    const res = await fetch(listenUrl, {
      method: 'POST', body,
      headers: { 'content-type': 'application/json', 'webhook-id': 'evt_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': `v1,${Buffer.alloc(32).toString('base64')} v1a,${Buffer.alloc(64).toString('base64')}` },
    });
    expect(res.status).toBe(400);
    const printed = await waitFor('the refused line', () => lines(listened).find((l) => l.webhook_id === 'evt_forged'));
    expect(printed.v1.valid).toBe(false);
    expect(printed.v1a.valid).toBe(false);
    expect(handler.deliveries.length).toBe(before);
  });

  it('events list, show and resend while the node runs: the resend reaches the target again with the same id', async () => {
    const reference = await paid();
    const first = await waitFor('the delivery', () => handler.of('request.paid', reference)[0]);
    const id = String(first.headers['webhook-id']);
    const listed = await waitFor('the event to show as delivered', () => {
      const entry = lines(cli(['events', 'list', '--data-dir', dataDir]).stdout).find((l) => l.id === id);
      return entry?.status === 'delivered' ? entry : undefined;
    });
    expect(listed).toMatchObject({ event: 'request.paid', targets: [{ url: listenUrl, attempts: 1, outcome: 'delivered', last_status: 200 }] });
    expect(lines(cli(['events', 'list', '--data-dir', dataDir, '--undelivered']).stdout).find((l) => l.id === id)).toBeUndefined();
    const shown = JSON.parse(cli(['events', 'show', id, '--data-dir', dataDir]).stdout);
    expect(shown).toMatchObject({ id, status: 'delivered', data: { type: 'path.request', reference } });

    const resend = cli(['events', 'resend', id, '--data-dir', dataDir]);
    expect(resend.status, resend.stderr).toBe(0);
    expect(JSON.parse(resend.stdout)).toEqual({ id, resend: 'requested' });
    const again = await waitFor('the resent delivery', () => handler.of('request.paid', reference)[1]);
    expect(again.headers['webhook-id']).toBe(id);
    expect(JSON.parse(again.raw).id).toBe(id);
  });

  it('events trigger TYPE sends a test event of each type, signed as real ones (the standardwebhooks library and listen verify it), marked test, never kept', async () => {
    const { secret } = JSON.parse(cli(['webhooks', 'secret', '--data-dir', dataDir]).stdout);
    const urls = `${handler.url('/trigger')},${listenUrl}`;
    for (const type of ['request.paid', 'receipt.issued', 'checkout.session.completed', 'checkout.session.expired']) {
      const r = await cliAsync(['events', 'trigger', type, '--data-dir', dataDir, '--webhook-urls', urls, '--dev']);
      expect(r.status, r.stderr + r.stdout).toBe(0);
      const sent = JSON.parse(r.stdout);
      expect(sent).toMatchObject({ event: type, test: true, targets: [{ url: handler.url('/trigger'), status: 200 }, { url: listenUrl, status: 200 }] });
      const got = handler.deliveries.find((d) => d.path === '/trigger' && d.headers['webhook-id'] === sent.id)!;
      expect(got.headers['path-event-id']).toBe(sent.id);
      const verified = new Webhook(secret).verify(got.raw, got.headers as Record<string, string>) as any;
      expect(verified).toMatchObject({ type: 'path.event', id: sent.id, event: type, test: true });
      expect(verified.kid).toEqual(expect.any(String));
      const printed = await waitFor('listen to verify it', () => lines(listened).find((l) => l.webhook_id === sent.id));
      expect(printed).toMatchObject({ event: type, v1: { valid: true }, v1a: { valid: true } });
      expect(lines(cli(['events', 'list', '--data-dir', dataDir]).stdout).find((l) => l.id === sent.id)).toBeUndefined();
    }
    // A target that refuses: exit 1 with its status; an unknown type or no endpoint: usage errors.
    handler.respond = () => 500;
    try {
      const refused = await cliAsync(['events', 'trigger', 'request.paid', '--data-dir', dataDir, '--webhook-urls', handler.url('/trigger'), '--dev']);
      expect(refused.status).toBe(1);
      expect(JSON.parse(refused.stdout).targets).toEqual([{ url: handler.url('/trigger'), status: 500 }]);
    } finally {
      handler.respond = () => 200;
    }
    const unknown = cli(['events', 'trigger', 'request.unpaid', '--data-dir', dataDir, '--webhook-urls', urls, '--dev']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown event type 'request.unpaid' \(one of request.paid, /);
    expect(cli(['events', 'trigger', 'request.paid', '--data-dir', dataDir]).status).toBe(2);
  });

  it('an event its target refuses is listed as undelivered; unknown ids are usage errors (exit 2)', async () => {
    handler.respond = () => 500;
    try {
      const reference = await paid();
      await waitFor('a refused attempt', () => handler.of('request.paid', reference)[0]);
      const pending = await waitFor('the pending event', () =>
        lines(cli(['events', 'list', '--data-dir', dataDir, '--undelivered']).stdout).find((l) => l.status === 'pending' && l.targets[0]?.last_status === 500));
      expect(pending.targets[0].outcome).toBeNull();
    } finally {
      handler.respond = () => 200;
    }
    expect(cli(['events', 'show', 'evt_00000000000000000000000000000000', '--data-dir', dataDir]).status).toBe(2);
    expect(cli(['events', 'resend', 'evt_00000000000000000000000000000000', '--data-dir', dataDir]).status).toBe(2);
    expect(cli(['events', 'show', '--data-dir', dataDir]).status).toBe(2);
  });
});

describe('finished events are kept for the retention, then swept', () => {
  it('with a 3 s retention a delivered event is shown, then forgotten by the sweep', async () => {
    const handler = new Receiver();
    await handler.open();
    const dataDir = tempDir('path-events-sweep');
    const own = createCredential(dataDir, 'local', { local: true });
    const b = createCredential(dataDir, 'beta', { local: false });
    const node = await startNode({ dataDir, args: ['--dev', '--webhook-urls', handler.url('/h')],
      env: { PATH_LIMIT_EVENTS_RETENTION_MS: '3000', PATH_LIMIT_REPLAY_SWEEP_INTERVAL_MS: '100' } });
    try {
      const local = new Client(node.baseUrl, own);
      const created = await local.post('/requests', { accepts: [EUR] });
      expect((await new Client(node.baseUrl, b).post(`/requests/${created.json.reference}/paid`)).status).toBe(200);
      const delivery = await waitFor('the delivery', () => handler.of('request.paid', created.json.reference)[0]);
      const id = String(delivery.headers['webhook-id']);
      expect(cli(['events', 'show', id, '--data-dir', dataDir]).status).toBe(0);
      await waitFor('the sweep to forget it', () => cli(['events', 'show', id, '--data-dir', dataDir]).status === 2);
      expect(lines(cli(['events', 'list', '--data-dir', dataDir]).stdout).find((l) => l.id === id)).toBeUndefined();
    } finally {
      await node.stop();
      await handler.close();
      removeDir(dataDir);
    }
  });
});

describe('events list with nothing kept', () => {
  it('says so on standard error and leaves standard output empty for scripts', () => {
    const dataDir = tempDir('path-events-none');
    try {
      createCredential(dataDir, 'local', { local: true });
      for (const [args, said] of [[[], 'no events are kept'], [['--undelivered'], 'no undelivered events are kept']] as const) {
        const r = cli(['events', 'list', '--data-dir', dataDir, ...args]);
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout).toBe('');
        expect(r.stderr.trim()).toBe(said);
      }
    } finally {
      removeDir(dataDir);
    }
  });
});
