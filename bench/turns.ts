// Two nodes side by side, measured in turns: the `versus` section (this build against another)
// and the `nodes` section (this build under two Node.js majors). Both nodes run at once, each in
// its own process and data directory; every round runs each stage on one node and then on the
// other, the order swapped every round, and a figure's ratio is the median of its per-round
// ratios, which the machine's drift from one minute to the next moves far less than the rates.
import type { BenchConfig, LoadShape, SignedLoad } from './config.js';
import { withCpuWatch, type CpuShare } from './cpu.js';
import { PAYEE_RECEIPT_BODY } from './fixtures.js';
import { statusText } from './http-post.js';
import type { LoadResult } from './load.js';
import {
  createLocalCredential,
  removeDir,
  runLoad,
  startNodeProcess,
  tempDir,
  type LocalCredential,
  type NodeOptions,
  type RunningServer,
} from './processes.js';
import { median } from './report.js';
import { fixedPostPlan } from './request-plans.js';
import { requireAllOk, runSignedLoad, type SignedRun } from './signed-load.js';
import { API_PREFIX, expectSigned } from './signed-request.js';

export interface Side {
  name: string;
  node: RunningServer;
  credential: LocalCredential;
  dir: string;
  /** The public read of a receipt this side committed when it started. */
  readPath: string;
}

export interface SideOptions extends Pick<NodeOptions, 'cli' | 'node' | 'env' | 'args'> {
  name: string;
  /** Writes the data directory's contents before the node starts (a directory of keys). */
  prepare?: (dataDir: string) => Promise<void>;
}

/** A fresh data directory and credential, the node started on them, and one receipt committed. */
export async function startSide(config: BenchConfig, options: SideOptions): Promise<Side> {
  const { name, prepare, ...node } = options;
  const dir = tempDir(`turns-${name.replace(/[^\w.-]/g, '_')}`);
  try {
    const credential = createLocalCredential(dir, options.cli);
    await prepare?.(dir);
    const running = await startNodeProcess({
      ...node,
      dataDir: dir,
      timeoutMs: config.child_timeout_ms,
    });
    try {
      const receipt = await expectSigned<{ reference: string }>(
        running.baseUrl,
        credential,
        'POST',
        `${API_PREFIX}/receipts`,
        PAYEE_RECEIPT_BODY,
        201,
      );
      const readPath = `${API_PREFIX}/receipts/${receipt.reference}`;
      return { name, node: running, credential, dir, readPath };
    } catch (error) {
      await running.stop();
      throw error;
    }
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}

export async function stopSides(sides: readonly Side[]): Promise<void> {
  for (const side of sides) {
    await side.node.stop();
    removeDir(side.dir);
  }
}

/** Signed durable `POST /receipts` (figure 4's request), the node's CPU watched; all 2xx. */
export async function postReceipts(
  config: BenchConfig,
  side: Side,
  load: SignedLoad,
): Promise<SignedRun> {
  const run = await runSignedLoad(config, side.node, {
    credentials: [side.credential],
    plan: fixedPostPlan(`${API_PREFIX}/receipts`, PAYEE_RECEIPT_BODY),
    load,
    idempotency: true,
  });
  requireAllOk(run, `${side.name} POST /receipts`);
  return run;
}

/** Public `GET`s of the side's receipt for `seconds`, the node's CPU watched; all must be 2xx. */
export async function readReceipt(
  config: BenchConfig,
  side: Side,
  options: { seconds: number; shape: LoadShape },
): Promise<{ result: LoadResult; cpu: CpuShare | null }> {
  const { connections, pipelining } = options.shape;
  const job = {
    kind: 'get',
    url: side.node.baseUrl + side.readPath,
    connections,
    pipelining,
    durationSeconds: options.seconds,
  };
  const run = await withCpuWatch(side.node.pid, (onMeasuring) =>
    runLoad<LoadResult>(job, config.child_timeout_ms, onMeasuring),
  );
  if (run.result.non2xx > 0) throw new Error(`${side.name} GET: ${statusText(run.result)}`);
  return run;
}

/** What one stage measured on one side: named figures (rates, CPU per operation). */
export type Figures = Record<string, number>;

export type Stage = (side: Side) => Promise<Figures>;

/** Each round's figures of the two sides, in the order the pair was given. */
export interface Rounds {
  first: Figures[];
  second: Figures[];
}

/**
 * `rounds` rounds over a pair of sides: in each, every stage runs on one side and then on the
 * other (the pair's first side first in the first round, second first in the next, and so on).
 * `onRound` sees each round's figures as they come.
 */
export async function inTurns(
  rounds: number,
  pair: readonly [Side, Side],
  stages: readonly Stage[],
  onRound: (round: number, first: Figures, second: Figures) => void,
): Promise<Rounds> {
  const measured: Rounds = { first: [], second: [] };
  for (let round = 0; round < rounds; round++) {
    const [a, b] = pair;
    const order = round % 2 === 0 ? [a, b] : [b, a];
    const figures = new Map<Side, Figures>([
      [a, {}],
      [b, {}],
    ]);
    for (const stage of stages) {
      for (const side of order) Object.assign(figures.get(side)!, await stage(side));
    }
    measured.first.push(figures.get(a)!);
    measured.second.push(figures.get(b)!);
    onRound(round, figures.get(a)!, figures.get(b)!);
  }
  return measured;
}

/** The median over the rounds of a figure's ratio, `over` / `under` (a side's rounds each). */
export function medianRatio(
  over: readonly Figures[],
  under: readonly Figures[],
  figure: string,
): number {
  return median(over.map((figures, i) => figures[figure]! / under[i]![figure]!));
}

/** The median over the rounds of one side's figure. */
export function medianOf(figures: readonly Figures[], figure: string): number {
  return median(figures.map((f) => f[figure]!));
}
