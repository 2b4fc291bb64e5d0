// The access log's lines (access-log.ts), read back from the file they were written to: each
// one JSON in pino's shape, with the fields of the answer it records, whatever parts of it were
// made for an earlier line.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/support/wait.js';
import { AccessLog } from './access-log.js';
import type { Answered } from './server.js';

const answers: Answered[] = [
  {
    requestId: 'a1b2-0',
    method: 'GET',
    operation: 'receipts.get',
    status: 200,
    seconds: 0.0000234,
    member: null,
  },
  {
    requestId: 'a1b2-1',
    method: 'GET',
    operation: 'receipts.get',
    status: 404,
    seconds: 1.5,
    member: null,
  },
  {
    requestId: 'a1b2-2',
    method: 'POST',
    operation: 'requests.create',
    status: 201,
    seconds: 0.0005,
    member: 'local',
  },
  {
    requestId: 'a1b2-3',
    method: 'GET',
    operation: 'receipts.get',
    status: 200,
    seconds: 0.012345678,
    member: 'bêta',
  },
  { requestId: 'a1b2-4', method: 'BREW"', operation: null, status: 404, seconds: 0, member: null },
  {
    requestId: 'a1b2-5',
    method: 'GET',
    operation: 'receipts.get',
    status: 200,
    seconds: 0.001,
    member: null,
  },
  {
    requestId: 'a1b2-6',
    method: 'GET',
    operation: 'requests.get',
    status: 200,
    seconds: 2.0009996,
    member: null,
  },
];

describe('AccessLog', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'path-node-access-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /**
   * The lines written for `list`, once all are in the file: the destination writes in the
   * background, and what `flushSync` hands over may land before a chunk still in flight.
   */
  const written = async (sample: number, list: readonly Answered[], count: number) => {
    const file = join(dir, `access-${sample}.log`);
    const fd = openSync(file, 'w');
    const log = new AccessLog({ sample, dest: fd });
    const before = Date.now();
    for (const answer of list) log.record({ ...answer });
    const after = Date.now();
    log.flushSync();
    const text = await waitFor('the lines', () => {
      const all = readFileSync(file, 'utf8');
      return all.split('\n').length > count && all;
    });
    closeSync(fd);
    expect(text.endsWith('\n')).toBe(true);
    return {
      lines: text
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line)),
      before,
      after,
    };
  };

  it('writes one JSON line per answer, each with its own fields', async () => {
    const { lines, before, after } = await written(1, answers, answers.length);
    expect(lines).toHaveLength(answers.length);
    lines.forEach((line, i) => {
      const answer = answers[i]!;
      expect(line.time).toBeGreaterThanOrEqual(before);
      expect(line.time).toBeLessThanOrEqual(after);
      expect(line).toEqual({
        level: 30,
        time: line.time,
        service: 'path-node',
        request_id: answer.requestId,
        method: answer.method,
        operation: answer.operation,
        status: answer.status,
        duration_ms: Math.round(answer.seconds * 1e6) / 1e3,
        member: answer.member,
        msg: 'request',
      });
    });
  });

  it('writes names and methods beyond ASCII as UTF-8, in every chunk they reach', async () => {
    const file = join(dir, 'wide.log');
    const fd = openSync(file, 'w');
    const log = new AccessLog({ sample: 1, dest: fd });
    const wide = { ...answers[3]!, member: 'bêta' };
    // The member's name is kept from the first chunk; the second reaches beyond ASCII only by it.
    log.record({ ...wide, requestId: 'w-0' });
    log.flushSync();
    log.record({ ...answers[0]!, requestId: 'w-1' });
    log.record({ ...wide, requestId: 'w-2' });
    log.flushSync();
    log.record({ ...answers[2]!, requestId: 'w-3', method: 'PÜT' });
    log.flushSync();
    const text = await waitFor('the lines', () => {
      const all = readFileSync(file, 'utf8');
      return all.split('\n').length > 4 && all;
    });
    closeSync(fd);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as { request_id: string; member: string; method: string });
    const by = new Map(lines.map((line) => [line.request_id, line]));
    expect(by.get('w-0')?.member).toBe('bêta');
    expect(by.get('w-1')?.member).toBeNull();
    expect(by.get('w-2')?.member).toBe('bêta');
    expect(by.get('w-3')?.method).toBe('PÜT');
  });

  it('writes every line at the default sample, refusals only at sample 0', async () => {
    const many = Array.from({ length: 3000 }, (_, i) => ({
      ...answers[i % answers.length]!,
      requestId: `x-${i}`,
    }));
    const ids = (lines: { request_id: string }[]) => lines.map((line) => line.request_id).sort();
    const all = await written(1, many, many.length);
    expect(ids(all.lines)).toEqual(many.map((a) => a.requestId).sort());
    const failed = many.filter((a) => a.status >= 400);
    const refusals = await written(0, many, failed.length);
    expect(ids(refusals.lines)).toEqual(failed.map((a) => a.requestId).sort());
  });
});
