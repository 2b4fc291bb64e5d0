// Where the CPU went during a load run, from /proc (Linux): the server's main thread, its other
// threads (the shard worker, LMDB's writer, libuv), and how much of the machine was idle. On a
// shared 2-core machine this tells a server-bound figure from one starved by other work.
import { readdirSync, readFileSync } from 'node:fs';

/** Kernel clock ticks per second (USER_HZ, `getconf CLK_TCK`); 100 on every Linux this runs on. */
const TICKS_PER_SECOND = 100;

interface Sample {
  at: number;
  threads: Map<string, number>;
  /** CPU seconds of the whole process so far, or null where /proc could not be read. */
  process: number | null;
  machine: { busy: number; total: number } | null;
}

function threadTicks(pid: number): Map<string, number> {
  const ticks = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return ticks;
  }
  for (const tid of tids) {
    try {
      // Fields after the command name: state is field 3, utime 14 and stime 15 (proc(5)).
      const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks.set(tid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return ticks;
}

/** CPU seconds a process has used so far, all its threads, user and system (`/proc/<pid>/stat`). */
export function processCpuSeconds(pid: number): number {
  // Fields after the command name: utime is field 14 and stime 15 (proc(5)).
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

function machineTicks(): { busy: number; total: number } | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    const idle = fields[3]! + fields[4]!;
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

function readProcessCpuSeconds(pid: number): number | null {
  try {
    return processCpuSeconds(pid);
  } catch {
    return null;
  }
}

function sample(pid: number): Sample {
  return { at: performance.now(), threads: threadTicks(pid), process: readProcessCpuSeconds(pid), machine: machineTicks() };
}

export interface CpuShare {
  /** Percent of one core. */
  mainThread: number;
  otherThreads: number;
  /** Percent of the whole machine that nobody used. */
  machineIdle: number | null;
  /**
   * CPU seconds the process used over the watch, user and system, every thread (also those that
   * ended in between, which the shares above miss), from `/proc/<pid>/stat`; null where unread.
   */
  processSeconds: number | null;
}

/** Starts measuring a process; call the result to stop and read the shares. */
export function watchCpu(pid: number): () => CpuShare {
  const start = sample(pid);
  return () => {
    const end = sample(pid);
    const seconds = (end.at - start.at) / 1000;
    const percent = (ticks: number) => (100 * ticks) / TICKS_PER_SECOND / seconds;
    let main = 0;
    let others = 0;
    for (const [tid, ticks] of end.threads) {
      const used = ticks - (start.threads.get(tid) ?? 0);
      if (tid === String(pid)) main += used;
      else others += used;
    }
    const machineIdle = start.machine === null || end.machine === null ? null
      : 100 - (100 * (end.machine.busy - start.machine.busy)) / (end.machine.total - start.machine.total);
    const processSeconds = start.process === null || end.process === null ? null : end.process - start.process;
    return { mainThread: percent(main), otherThreads: percent(others), machineIdle, processSeconds };
  };
}

export function cpuText(share: CpuShare): string {
  const idle = share.machineIdle === null ? '' : `, machine idle ${share.machineIdle.toFixed(0)}%`;
  return `server CPU: main thread ${share.mainThread.toFixed(0)}%, other threads ${share.otherThreads.toFixed(0)}% of a core${idle}`;
}

/** Runs a load whose measured phase starts when it calls `onMeasuring`; watches `pid` from then on. */
export async function withCpuWatch<T>(pid: number, run: (onMeasuring: () => void) => Promise<T>): Promise<{ result: T; cpu: CpuShare | null }> {
  const watch: { stop: (() => CpuShare) | null } = { stop: null };
  const result = await run(() => { watch.stop = watchCpu(pid); });
  return { result, cpu: watch.stop === null ? null : watch.stop() };
}
