// Figure 15: `npm start` on a built tree, from the command to the node's `listening` line (issue
// 31: at most 3 s). The tree is the one the benchmark runs from, built by `prebench`; each run
// starts on a fresh data directory with every port picked by the system, and is stopped once it
// listens. The figure is the median of `runs`, beside the target.
import { spawn } from 'node:child_process';
import type { BenchConfig } from './config.js';
import { removeDir, tempDir } from './processes.js';
import type { Report } from './report.js';

const TARGET_SECONDS = 3;

/** Seconds from spawning `npm start` to its `listening` line. */
function startOnce(timeoutMs: number): Promise<number> {
  const dataDir = tempDir('start');
  const args = ['start', '--', '--data-dir', dataDir, '--port', '0', '--external-port', '0', '--admin-port', '0'];
  const started = performance.now();
  const child = spawn('npm', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  return new Promise<number>((resolve, reject) => {
    let output = '';
    const finish = (outcome: () => void) => {
      clearTimeout(timer);
      try { process.kill(-child.pid!, 'SIGTERM'); } catch { /* already gone */ }
      child.once('exit', () => { removeDir(dataDir); outcome(); });
    };
    const timer = setTimeout(() => finish(() => reject(new Error(`no listening line within ${timeoutMs} ms:\n${output}`))), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('"msg":"listening"')) {
        const seconds = (performance.now() - started) / 1000;
        finish(() => resolve(seconds));
      }
    });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
  });
}

export async function runStart(config: BenchConfig, report: Report): Promise<void> {
  report.heading('15. npm start on a built tree, to listening');
  const seconds: number[] = [];
  for (let i = 0; i < config.start.runs; i++) seconds.push(await startOnce(config.child_timeout_ms));
  seconds.sort((a, b) => a - b);
  report.line(`  runs: ${seconds.map((s) => s.toFixed(2)).join(', ')} s`);
  const median = seconds[Math.floor(seconds.length / 2)]!;
  report.add({
    section: '15 start',
    figure: 'npm start to listening, median (s)',
    value: median.toFixed(2),
    target: { text: `<= ${TARGET_SECONDS} s`, met: median <= TARGET_SECONDS },
  });
}
