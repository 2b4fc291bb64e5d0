// Figure 1: the per-object costs every signed answer pays (tinybench, one core): canonical JSON
// of a receipt envelope (P2), signing it, verifying it, and reading a request body strictly (P2:
// I-JSON) beside JSON.parse alone. The floors the node's figures are set against are in floors.ts.
import { Bench } from 'tinybench';
import { BODY_DEPTH_MAX } from '../src/config.js';
import { canonicalJson } from '../src/protocol/canonical.js';
import { parseStrictObject } from '../src/protocol/strict-json.js';
import { signObject, verifyObject, type SigningKey } from '../src/protocol/signing.js';
import type { BenchConfig } from './config.js';
import { freshSigningKey, issueReceipt, PAYEE_RECEIPT_BODY } from './fixtures.js';
import { rate, ratio, type Report } from './report.js';

export interface TaskRate {
  name: string;
  /** Mean operations per second. */
  perSecond: number;
  /** Mean time of one operation, microseconds. */
  meanUs: number;
}

/** Runs synchronous tasks one after the other on this thread. */
export function measureTasks(tasks: Record<string, () => void>, timeMs: number): TaskRate[] {
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(250, timeMs), throws: true });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  bench.runSync();
  return bench.tasks.map((task) => {
    const result = task.result;
    if (result.state !== 'completed') throw new Error(`micro-benchmark '${task.name}' ended ${result.state}`);
    return { name: task.name, perSecond: result.throughput.mean, meanUs: result.latency.mean * 1000 };
  });
}

/** A receipt envelope as the node signs it: the signed object, the same object unsigned, its key. */
interface EnvelopeFixture {
  signed: Record<string, unknown>;
  unsigned: Record<string, unknown>;
  key: SigningKey;
}

function envelopeFixture(): EnvelopeFixture {
  const key = freshSigningKey();
  const signed = JSON.parse(issueReceipt(key, Date.now()).envelopeText) as Record<string, unknown>;
  const { signature: _signature, ...unsigned } = signed;
  return { signed, unsigned, key };
}

export function runMicro(config: BenchConfig, report: Report): void {
  report.heading('1. Micro-benchmarks (tinybench, one core)');
  const { signed, unsigned, key } = envelopeFixture();
  report.line(`  receipt envelope: ${canonicalJson(signed).length} bytes of canonical JSON`);
  const rates = measureTasks({
    canonicalise: () => { canonicalJson(signed); },
    sign: () => { signObject(unsigned, key); },
    verify: () => {
      if (!verifyObject(signed, key.publicKeyHex).valid) throw new Error('the fixture envelope does not verify');
    },
  }, config.micro.task_time_ms);
  for (const r of rates) report.add({ section: '1 micro', figure: `${r.name} (ops/s, mean ${r.meanUs.toFixed(1)} us)`, value: rate(r.perSecond) });
  runBodyParse(config, report);
}

/**
 * The body of a POST /receipts read as the front end reads it (parseStrictObject), against
 * JSON.parse of the same bytes; and a valid body the cheap checks cannot clear (a string that
 * holds `":`), which pays for the strict read.
 */
function runBodyParse(config: BenchConfig, report: Report): void {
  const text = JSON.stringify(PAYEE_RECEIPT_BODY);
  const plain = Buffer.from(text);
  const quoted = Buffer.from(text.replace('"rail":"book"', '"rail":"book","x_note":"a\\":b"'));
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const strict = (body: Buffer) => () => {
    const parsed = parseStrictObject(body, { depthMax: BODY_DEPTH_MAX });
    if (!parsed.ok) throw new Error('the fixture body was refused');
  };
  const rates = measureTasks({
    'JSON.parse of a POST /receipts body': () => { JSON.parse(utf8.decode(plain)); },
    'strict body read, fast path': strict(plain),
    'strict body read, strict path': strict(quoted),
  }, config.micro.task_time_ms);
  report.line(`  POST /receipts body: ${plain.length} bytes`);
  for (const r of rates) {
    const figure = `${r.name} (ops/s, mean ${r.meanUs.toFixed(1)} us)`;
    report.add({ section: '1 micro', figure, value: rate(r.perSecond) });
  }
  const [base, fast, slow] = rates.map((r) => r.meanUs) as [number, number, number];
  const figure = 'strict body read / JSON.parse (fast path, strict path)';
  report.add({ section: '1 micro', figure, value: `${ratio(fast / base)}, ${ratio(slow / base)}` });
}

